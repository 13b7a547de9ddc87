//! Speed of the pieces the forwarding nodes call per packet.
//!
//! `cargo bench -p tern-wire --bench wire` (figures in the crate report).

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tern_wire::checksum;
use tern_wire::vlan;
use tern_wire::{IpProtocol, Ipv4Packet, Ipv6Packet};

/// RFC 1071 as written, 16 bits at a time: the baseline `checksum::data`
/// is measured against.
fn naive_sum(data: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for w in &mut chunks {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u32::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

fn bench_checksum(c: &mut Criterion) {
    let mut group = c.benchmark_group("checksum");
    for len in [20usize, 64, 576, 1500] {
        let buf: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("data", len), &buf, |b, buf| b.iter(|| checksum::data(black_box(buf))));
        group.bench_with_input(BenchmarkId::new("naive", len), &buf, |b, buf| b.iter(|| naive_sum(black_box(buf))));
    }
    let header: Vec<u8> = (0..20u8).collect();
    let header: &[u8; 20] = header.first_chunk().unwrap();
    group.throughput(Throughput::Bytes(20));
    group.bench_function("header20", |b| b.iter(|| checksum::header20(black_box(header))));
    group.finish();
}

/// A 64-byte Ethernet + IPv4 + UDP frame.
fn ipv4_frame(i: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12] = 0x08;
    let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
    ip.set_version(4);
    ip.set_header_len(20);
    ip.set_ttl(64);
    ip.set_protocol(IpProtocol::UDP);
    ip.set_src_addr([10, 0, 0, 1].into());
    ip.set_dst_addr((0xc633_6400 + (i & 0xff)).into());
    ip.set_total_len(20);
    ip.fill_checksum();
    f
}

/// What ip4-input + rewrite read and write per packet: walk the tags,
/// check lengths, verify the header checksum, read TTL and destination,
/// decrement TTL with the incremental checksum update.
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

fn bench_fast_path(c: &mut Criterion) {
    let frames: Vec<Vec<u8>> = (0..256).map(ipv4_frame).collect();
    let mut group = c.benchmark_group("ipv4");
    group.throughput(Throughput::Elements(frames.len() as u64));
    group.bench_function("input_and_ttl_256", |b| {
        b.iter_batched_ref(
            || frames.clone(),
            |frames| {
                let mut acc = 0u32;
                for f in frames.iter_mut() {
                    acc ^= ipv4_fast_path(f);
                }
                acc
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();

    // QinQ-tagged frame and an IPv6 packet with hop-by-hop + fragment.
    let mut qinq = [0u8; 64];
    qinq[12..22].copy_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x00, 0xc8, 0x86, 0xdd]);
    let mut v6 = [0u8; 72];
    v6[0] = 0x60;
    v6[5] = 32;
    v6[6] = 0; // hop-by-hop
    v6[40] = 44; // -> fragment
    v6[48] = 17; // -> UDP
    let mut group = c.benchmark_group("walk");
    group.throughput(Throughput::Elements(1));
    group.bench_function("vlan_qinq", |b| b.iter(|| vlan::walk_tags(black_box(&qinq))));
    group.bench_function("ipv6_hbh_frag", |b| {
        b.iter(|| Ipv6Packet::new_checked(black_box(&v6[..])).and_then(|p| p.walk_ext_headers()))
    });
    group.finish();
}

criterion_group!(benches, bench_checksum, bench_fast_path);
criterion_main!(benches);
