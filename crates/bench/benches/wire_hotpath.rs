//! Per-packet cost of the wire calls on the forwarding path, as the minimum
//! over many short runs. On a shared or loaded machine the minimum is the
//! figure that means something (criterion's mean moves with the load; see
//! crates/wire/benches/wire.rs for the criterion version).
//!
//! `cargo bench -p tern-bench --bench wire_hotpath`

use std::hint::black_box;
use std::time::Instant;
use tern_wire::{IpProtocol, Ipv4Packet, Ipv6Packet, checksum, vlan};

/// Best time per call of `f`, over `reps` runs of `per` calls.
fn min_ns<F: FnMut()>(reps: usize, per: usize, mut f: F) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        for _ in 0..per {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / per as f64);
    }
    best
}

fn ipv4_frame(i: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12] = 0x08;
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
    ip.set_version(4);
    ip.set_header_len(20);
    ip.set_total_len(20);
    ip.set_ttl(255);
    ip.set_protocol(IpProtocol::UDP);
    ip.set_src_addr([10, 0, 0, 1].into());
    ip.set_dst_addr((0xc633_6400 + (i & 0xff)).into());
    ip.fill_checksum();
    f
}

/// What ip4-input and the rewrite read and write per packet.
fn ipv4_fast_path(frame: &mut [u8]) -> u32 {
    let Ok(walk) = vlan::walk_tags(frame) else { return 0 };
    let Some(l3) = frame.get_mut(walk.l3_offset..) else { return 0 };
    let Ok(mut ip) = Ipv4Packet::new_checked(l3) else { return 0 };
    if ip.version() != 4 || !ip.verify_checksum() || ip.ttl() <= 1 {
        return 0;
    }
    let dst = ip.dst_addr_u32();
    ip.decrement_ttl();
    dst
}

fn main() {
    for len in [20usize, 64, 576, 1500] {
        let buf: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let ns = min_ns(2000, 200, || {
            black_box(checksum::data(black_box(&buf)));
        });
        println!("checksum::data {len:5} B      {ns:6.2} ns  {:5.2} GB/s", len as f64 / ns);
    }
    let header = [0x45u8; 20];
    let ns = min_ns(2000, 1000, || {
        black_box(checksum::header20(black_box(&header)));
    });
    println!("checksum::header20           {ns:6.2} ns");

    let mut frames: Vec<Vec<u8>> = (0..256).map(ipv4_frame).collect();
    let mut best = f64::MAX;
    for _ in 0..2000 {
        // Reset TTLs (100 rounds below take them from 255 to 155).
        for f in frames.iter_mut() {
            let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
            ip.set_ttl(255);
            ip.fill_checksum();
        }
        let t = Instant::now();
        let mut acc = 0u32;
        for _ in 0..100 {
            for f in frames.iter_mut() {
                acc ^= ipv4_fast_path(black_box(f));
            }
        }
        black_box(acc);
        best = best.min(t.elapsed().as_nanos() as f64 / (100.0 * 256.0));
    }
    println!(
        "ipv4 input + TTL, per packet {best:6.2} ns  (walk_tags, check_len, verify_checksum, ttl, dst, decrement_ttl)"
    );

    let mut untagged = [0u8; 64];
    untagged[12] = 0x08;
    let mut qinq = [0u8; 64];
    qinq[12..22].copy_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0xc8, 0x86, 0xdd]);
    for (name, frame) in [("untagged", &untagged), ("qinq", &qinq)] {
        let ns = min_ns(2000, 1000, || {
            black_box(vlan::walk_tags(black_box(&frame[..]))).ok();
        });
        println!("vlan::walk_tags {name:9}    {ns:6.2} ns");
    }

    let mut v6 = [0u8; 72];
    v6[0] = 0x60;
    v6[5] = 32;
    v6[6] = 0; // hop-by-hop
    v6[40] = 44; // -> fragment
    v6[48] = 17; // -> UDP
    let ns = min_ns(2000, 1000, || {
        black_box(Ipv6Packet::new_checked(black_box(&v6[..])).and_then(|p| p.walk_ext_headers())).ok();
    });
    println!("ipv6 check + walk (hbh+frag) {ns:6.2} ns");
}
