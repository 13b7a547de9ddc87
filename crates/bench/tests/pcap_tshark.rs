//! The generator's frames (the Rust reference the XDP program is checked
//! against in bpf_programs.rs) written to pcap and decoded by tshark:
//! checksums valid, IMIX proportions exact over a cycle, VLAN tags right,
//! signature fields where they belong. Needs tshark (apt-get install -y tshark).

mod common;

use std::collections::BTreeMap;
use std::process::Command;

use tern_bench::pcap::write_profile_pcap;
use tern_bench::traffic::{FCS_LEN, FrameSize, Imix};

struct Row {
    len: usize,
    vlan: Option<u16>,
    ip_csum: Option<String>,
    udp_csum: String,
    src: String,
    dst: String,
    sport: u16,
    dport: u16,
    payload: Vec<u8>,
}

fn tshark(path: &std::path::Path) -> Vec<Row> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-E",
            "separator=;",
            "-e",
            "frame.len",
            "-e",
            "vlan.id",
            "-e",
            "ip.checksum.status",
            "-e",
            "udp.checksum.status",
            "-e",
            "ip.src",
            "-e",
            "ipv6.src",
            "-e",
            "ip.dst",
            "-e",
            "ipv6.dst",
            "-e",
            "udp.srcport",
            "-e",
            "udp.dstport",
            "-e",
            "udp.payload",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run tshark ({e}): apt-get install -y tshark"));
    assert!(out.status.success(), "tshark failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(';').collect();
            assert_eq!(f.len(), 11, "tshark line {l}");
            let hex = f[10].replace(':', "");
            let payload =
                (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0)).collect();
            Row {
                len: f[0].parse().unwrap_or(0),
                vlan: f[1].parse().ok(),
                ip_csum: (!f[2].is_empty()).then(|| f[2].to_string()),
                udp_csum: f[3].to_string(),
                src: format!("{}{}", f[4], f[5]),
                dst: format!("{}{}", f[6], f[7]),
                sport: f[8].parse().unwrap_or(0),
                dport: f[9].parse().unwrap_or(0),
                payload,
            }
        })
        .collect()
}

#[test]
fn templates_decode_with_valid_checksums() {
    let dir = std::env::temp_dir().join(format!("tern-bench-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (name, p) in common::profiles() {
        let cycle = p.slots().expect("slots").len() as u64;
        // Two full cycles: per-stream counters must carry over.
        let n = 2 * cycle.max(40);
        let path = dir.join(format!("{name}.pcap"));
        write_profile_pcap(&path, &p, n).expect("pcap");
        let rows = tshark(&path);
        assert_eq!(rows.len() as u64, n, "{name}: frame count");
        let mut per_stream_seq: BTreeMap<u8, u32> = BTreeMap::new();
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r.udp_csum, "1", "{name} frame {i}: UDP checksum not good");
            if let Some(c) = &r.ip_csum {
                assert_eq!(c, "1", "{name} frame {i}: IPv4 header checksum not good");
            }
            assert_eq!(r.vlan, p.vlan, "{name} frame {i}: VLAN tag");
            // (tshark: checksum status 1 is "good", 0 "bad", 2 "unverified".)
            // Signature: magic "tr", stream, version 1, sequence, time.
            assert!(r.payload.len() >= 12, "{name} frame {i}: payload {}", r.payload.len());
            assert_eq!(&r.payload[0..2], b"tr", "{name} frame {i}: magic");
            assert_eq!(r.payload[3], 1, "{name} frame {i}: version");
            let stream = r.payload[2];
            let seq = u32::from_be_bytes([r.payload[4], r.payload[5], r.payload[6], r.payload[7]]);
            let ts = u32::from_be_bytes([r.payload[8], r.payload[9], r.payload[10], r.payload[11]]);
            assert_eq!(ts as usize, i, "{name} frame {i}: timestamp");
            let expect = per_stream_seq.entry(stream).or_insert(0);
            assert_eq!(seq, *expect, "{name} frame {i}: sequence of stream {stream}");
            *expect += 1;
            assert!(r.payload[12..].iter().all(|&b| b == 0), "{name} frame {i}: padding not zero");
            // Flow fields stay inside their ranges.
            let spec = &p.streams[usize::from(stream)];
            let f = &spec.flows;
            assert!((f.sport_base..f.sport_base + f.sport_count).contains(&r.sport), "{name}: sport {}", r.sport);
            assert!((f.dport_base..f.dport_base + f.dport_count).contains(&r.dport), "{name}: dport {}", r.dport);
            assert!(!r.src.is_empty() && !r.dst.is_empty());
        }
        // Streams alternate and each gets half (or its share) of the frames.
        assert_eq!(per_stream_seq.len(), p.streams.len(), "{name}: streams seen");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An IMIX, its (frame size, count) per cycle, and the cycle length.
type ImixCase = (Imix, &'static [(usize, usize)], usize);

#[test]
fn imix_proportions_are_exact_over_a_cycle() {
    let cases: [ImixCase; 3] = [
        (Imix::Imix1, &[(64, 11), (594, 5), (1518, 4)], 20),
        (Imix::Imix3, &[(78, 58), (496, 3), (594, 24), (1518, 15)], 100),
        (Imix::Imix2, &[(64, 55), (594, 25 + 24), (1518, 20 + 15), (78, 58), (496, 3)], 200),
    ];
    let dir = std::env::temp_dir().join(format!("tern-bench-imix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for (imix, want, cycle) in cases {
        let p = common::profile(vec![common::stream("a", true, common::SOME_FLOWS)], FrameSize::Imix(imix), None);
        assert_eq!(p.slots().expect("slots").len(), cycle);
        let path = dir.join(format!("{imix:?}.pcap"));
        write_profile_pcap(&path, &p, cycle as u64).expect("pcap");
        let rows = tshark(&path);
        let mut by_size: BTreeMap<usize, usize> = BTreeMap::new();
        for r in &rows {
            *by_size.entry(r.len + FCS_LEN).or_insert(0) += 1;
        }
        let want: BTreeMap<usize, usize> = want.iter().copied().collect();
        assert_eq!(by_size, want, "{imix:?}");
        // IMIX3 and IMIX2's IPv6 half are IPv6: no IPv4 header checksum.
        let v6 = rows.iter().filter(|r| r.ip_csum.is_none()).count();
        let expect_v6 = match imix {
            Imix::Imix1 => 0,
            Imix::Imix2 => 100,
            Imix::Imix3 => 100,
        };
        assert_eq!(v6, expect_v6, "{imix:?}: IPv6 frames");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
