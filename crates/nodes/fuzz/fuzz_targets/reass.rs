//! The reassembly table (`tern_nodes::reass::table`) under any sequence
//! of fragments: raw bytes parsed as IPv4/IPv6, and fragments built from
//! the input (few sources and identifications, so that they meet), with
//! time moving, and new limits now and then (a reload). Checks that
//! nothing panics, that every fragment ends in
//! exactly one counter or datagram, and that the table stays within its
//! bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../src/reass/table.rs"]
#[allow(dead_code)]
mod table;

use table::{Limits, Table, parse_v4, parse_v6};

/// An IPv4 fragment: source 10.0.0.`src`, identification `id`, payload
/// `len` bytes at byte offset `off8 * 8`, MF as given.
fn v4(src: u8, id: u8, off8: u16, len: usize, more: bool, fill: u8) -> Vec<u8> {
    let total = (20 + len) as u16;
    let fl = off8 & 0x1fff | if more { 0x2000 } else { 0 };
    let mut p = vec![0x45, 0, 0, 0, 0, id, 0, 0, 64, 50, 0, 0, 10, 0, 0, src, 10, 0, 0, 1];
    p[2..4].copy_from_slice(&total.to_be_bytes());
    p[6..8].copy_from_slice(&fl.to_be_bytes());
    p.resize(20 + len, fill);
    p
}

/// The same over IPv6 with a fragment header.
fn v6(src: u8, id: u8, off8: u16, len: usize, more: bool, fill: u8) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0, 0, 0, 44, 64];
    p[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
    p.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, src, 0, 0, 0, 0, 0, 0, 0, 2]);
    p.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let fo = (off8 << 3) | u16::from(more);
    p.extend_from_slice(&[50, 0, (fo >> 8) as u8, fo as u8, 0, 0, 0, id]);
    p.resize(48 + len, fill);
    p
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let v6_ = mode & 1 != 0;
    let mut limits = Limits {
        datagrams: 1 + usize::from(mode >> 1 & 7),
        per_source: 1 + usize::from(mode >> 4 & 3),
        max_size: 4096,
        max_frags: 8,
        timeout_ns: 1000,
    };
    let mut t = Table::new(limits, v6_);
    let (mut now, mut sent, mut out) = (0u64, 0u64, 0u64);
    // A datagram under way when max_size shrinks may finish at the old one.
    let mut size_bound = limits.max_size;
    while let Some((op, r)) = rest.split_first_chunk::<6>() {
        rest = r;
        if op[0] & 0xf0 == 0x70 {
            limits = Limits {
                datagrams: 1 + usize::from(op[1] & 7),
                per_source: 1 + usize::from(op[2] & 3),
                max_size: 8 + usize::from(op[3]) * 16,
                max_frags: 1 + usize::from(op[4] & 15),
                timeout_ns: 100 + u64::from(op[5]) * 10,
            };
            size_bound = size_bound.max(limits.max_size);
            t.set_limits(limits);
            assert!(t.len() <= limits.datagrams, "a smaller table evicts down to its size");
            continue;
        }
        now += u64::from(op[0] & 0x0f) * 100;
        let pkt = if op[0] & 0x80 != 0 {
            // Raw bytes: as many as op[1] says, whatever they are.
            let n = usize::from(op[1]).min(rest.len());
            let (raw, r) = rest.split_at(n);
            rest = r;
            raw.to_vec()
        } else {
            let (src, id) = (op[1] & 3, op[2] & 3);
            let off8 = u16::from(op[3]) * 2;
            let len = usize::from(op[4]) * 8 + usize::from(op[5] & 7);
            let more = op[5] & 0x80 != 0;
            if v6_ { v6(src, id, off8, len, more, op[0]) } else { v4(src, id, off8, len, more, op[0]) }
        };
        let f = if v6_ { parse_v6(&pkt) } else { parse_v4(&pkt) };
        let Some(f) = f else { continue };
        sent += 1;
        if let Some(d) = t.add(&f, now) {
            assert!(d.payload.len() <= size_bound);
            out += u64::from(d.frags);
            t.recycle(d);
        }
        assert!(t.len() <= limits.datagrams);
    }
    t.expire(u64::MAX);
    assert!(t.is_empty());
    let counted: u64 = t.take_counts().iter().sum();
    assert_eq!(counted + out, sent, "every fragment ends in one place");
});
