#![allow(clippy::indexing_slicing)]

use super::*;
use proptest::prelude::*;

const SEC: u64 = 1_000_000_000;

/// An IPv4 packet (protocol 50) from 192.0.2.`src` to 192.0.2.1 carrying
/// `payload`, DF clear, identification `id`, checksum right.
fn v4(src: u8, id: u16, payload: &[u8]) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 50, 0, 0, 192, 0, 2, src, 192, 0, 2, 1];
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    let c = !checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

/// `pkt` (from [`v4`]) cut at the payload offsets `cuts` (multiples of 8),
/// its identification kept: the nodes' fragmenter, without the frame.
fn frag4(pkt: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let frame = [&[0u8; 14][..], pkt].concat();
    let id = u32::from(u16::from_be_bytes([pkt[4], pkt[5]]));
    crate::reass::testing::fragment(&frame, cuts, id).into_iter().map(|f| f[14..].to_vec()).collect()
}

/// An IPv6 packet from 2001:db8::`src` to 2001:db8::1, next header 50,
/// with `exts` (whole extension headers, the first announced by
/// `first`, the last announcing 50) before `payload`.
fn v6(src: u8, first: u8, exts: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0, 0, 0, first, 64];
    p[4..6].copy_from_slice(&((exts.len() + payload.len()) as u16).to_be_bytes());
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, src]);
    p.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    p.extend_from_slice(exts);
    p.extend_from_slice(payload);
    p
}

/// `payload` fragmented at `cuts` behind `exts` (the unfragmentable
/// part; `first` its first header, 44 without), id `id`, protocol 50.
fn frag6(src: u8, id: u32, first: u8, exts: &[u8], payload: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(payload.len());
    bounds
        .windows(2)
        .map(|w| {
            let more = w[1] != payload.len();
            let fo = (w[0] as u16) | u16::from(more);
            let mut fh = vec![50, 0, 0, 0, 0, 0, 0, 0];
            fh[2..4].copy_from_slice(&fo.to_be_bytes());
            fh[4..8].copy_from_slice(&id.to_be_bytes());
            let mut e = exts.to_vec();
            if !exts.is_empty() {
                // The last extension header announces the fragment header.
                let mut at = 0;
                loop {
                    let len = (usize::from(e[at + 1]) + 1) * 8;
                    if at + len == e.len() {
                        e[at] = 44;
                        break;
                    }
                    at += len;
                }
            }
            e.extend_from_slice(&fh);
            v6(src, if exts.is_empty() { 44 } else { first }, &e, &payload[w[0]..w[1]])
        })
        .collect()
}

fn payload(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// Feeds `frags` (IPv4 when `!v6`) at time `now`: the datagrams out.
fn feed(t: &mut Table, frags: &[Vec<u8>], now: u64) -> Vec<Datagram> {
    frags
        .iter()
        .filter_map(|f| {
            let fr = if t.v6 { parse_v6(f) } else { parse_v4(f) }.expect("a fragment");
            t.add(&fr, now)
        })
        .collect()
}

fn counts(t: &mut Table) -> [u64; REASONS] {
    t.take_counts()
}

fn only(r: Reason, n: u64) -> [u64; REASONS] {
    let mut c = [0; REASONS];
    c[r as usize] = n;
    c
}

#[test]
fn ipv4_in_order_and_reversed_give_back_the_packet() {
    let pkt = v4(2, 0x1234, &payload(1400));
    for order in [false, true] {
        let mut t = Table::new(Limits::default(), false);
        let mut fr = frag4(&pkt, &[512, 1024]);
        if order {
            fr.reverse();
        }
        let out = feed(&mut t, &fr, 0);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].frags, 3);
        assert_eq!(out[0].bytes(), pkt, "reversed: {order}");
        assert_eq!(checksum(&out[0].header), 0xffff, "header checksum");
        assert!(t.is_empty());
        assert_eq!(counts(&mut t), [0; REASONS]);
    }
}

#[test]
fn ipv4_keeps_df_and_options_of_the_first_fragment() {
    let mut pkt = v4(2, 7, &payload(100));
    // DF, and a 4-byte option (NOP x4): IHL 6.
    pkt.splice(20..20, [1, 1, 1, 1]);
    pkt[0] = 0x46;
    pkt[2..4].copy_from_slice(&124u16.to_be_bytes());
    pkt[6] = 0x40;
    pkt[10..12].fill(0);
    let c = !checksum(&pkt[..24]);
    pkt[10..12].copy_from_slice(&c.to_be_bytes());
    let mut a = pkt[..24].to_vec();
    a[2..4].copy_from_slice(&(24u16 + 48).to_be_bytes());
    a[6] = 0x20; // MF (DF lost on a fragment: kept from the first anyway)
    a.extend_from_slice(&pkt[24..72]);
    let mut b = pkt[..20].to_vec();
    b[0] = 0x45;
    b[2..4].copy_from_slice(&(20u16 + 52).to_be_bytes());
    b[6..8].copy_from_slice(&6u16.to_be_bytes());
    b.extend_from_slice(&pkt[72..]);
    let mut t = Table::new(Limits::default(), false);
    let out = feed(&mut t, &[b, a], 0);
    let mut want = pkt.clone();
    want[6] = 0; // the first fragment had no DF
    want[10..12].fill(0);
    let c = !checksum(&want[..24]);
    want[10..12].copy_from_slice(&c.to_be_bytes());
    assert_eq!(out[0].bytes(), want);
}

#[test]
fn ipv6_any_order_with_an_unfragmentable_part() {
    let data = payload(3000);
    // Hop-by-hop (8 bytes of PadN) then destination options (8 bytes).
    let exts = [60, 0, 1, 4, 0, 0, 0, 0, 50, 0, 1, 4, 0, 0, 0, 0];
    let whole = v6(9, 0, &exts, &data);
    let fr = frag6(9, 0xdead_beef, 0, &exts, &data, &[1232, 2464]);
    for perm in [[0, 1, 2], [2, 1, 0], [1, 2, 0], [2, 0, 1]] {
        let mut t = Table::new(Limits::default(), true);
        let f: Vec<_> = perm.iter().map(|&i| fr[i].clone()).collect();
        let out = feed(&mut t, &f, 0);
        assert_eq!(out.len(), 1, "{perm:?}");
        assert_eq!(out[0].bytes(), whole, "{perm:?}");
        assert_eq!(counts(&mut t), [0; REASONS]);
    }
    // Without extension headers: the fixed header's next header becomes 50.
    let mut t = Table::new(Limits::default(), true);
    let out = feed(&mut t, &frag6(9, 1, 44, &[], &data, &[1448]), 0);
    assert_eq!(out[0].bytes(), v6(9, 50, &[], &data));
}

#[test]
fn an_overlap_drops_the_datagram_and_what_comes_after_it() {
    let data = payload(2000);
    let mut fr = frag6(3, 5, 44, &[], &data, &[800, 1600]);
    // A fragment at 792..1600: overlaps the first.
    let mut bad = frag6(3, 5, 44, &[], &data, &[792, 1600]).remove(1);
    bad.truncate(bad.len());
    let mut t = Table::new(Limits::default(), true);
    assert!(feed(&mut t, &[fr[0].clone(), bad], 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Overlap, 2));
    // The rest of the datagram comes: dropped too (RFC 5722).
    assert!(feed(&mut t, &fr.split_off(1), 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Overlap, 2));
    // At the timeout the dead datagram goes, counted nowhere again.
    t.expire(2 * SEC);
    assert!(t.is_empty());
    assert_eq!(counts(&mut t), [0; REASONS]);
    // IPv4 alike.
    let pkt = v4(2, 9, &payload(64));
    let a = frag4(&pkt, &[32]);
    let b = frag4(&pkt, &[16]);
    let mut t = Table::new(Limits::default(), false);
    assert!(feed(&mut t, &[a[1].clone(), b[1].clone(), a[0].clone()], 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Overlap, 3));
}

#[test]
fn an_exact_duplicate_is_dropped_alone() {
    let pkt = v4(2, 9, &payload(1000));
    let fr = frag4(&pkt, &[496]);
    let mut t = Table::new(Limits::default(), false);
    let out = feed(&mut t, &[fr[0].clone(), fr[0].clone(), fr[1].clone()], 0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes(), pkt);
    assert_eq!(counts(&mut t), only(Reason::Duplicate, 1));
}

#[test]
fn an_incomplete_datagram_times_out() {
    let pkt = v4(2, 9, &payload(1000));
    let fr = frag4(&pkt, &[240, 496]);
    let mut t = Table::new(Limits::default(), false);
    assert!(feed(&mut t, &[fr[0].clone(), fr[2].clone()], 0).is_empty());
    assert_eq!(t.next_deadline(), Some(2 * SEC));
    t.expire(2 * SEC - 1);
    assert_eq!(t.len(), 1);
    // The missing fragment after the timeout starts a new datagram.
    assert!(feed(&mut t, &fr[1..2], 2 * SEC).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Timeout, 2));
    t.expire(4 * SEC);
    assert_eq!(counts(&mut t), only(Reason::Timeout, 1));
    assert_eq!(t.next_deadline(), None);
}

#[test]
fn limits_size_fragments_and_bad_lengths() {
    let lim = Limits { max_size: 1024, max_frags: 3, ..Limits::default() };
    // Past max_size: the fragment and what was held.
    let fr = frag4(&v4(2, 1, &payload(2000)), &[1000]);
    let mut t = Table::new(lim, false);
    assert!(feed(&mut t, &fr, 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::TooBig, 2));
    // A fourth fragment.
    let fr = frag4(&v4(2, 2, &payload(1000)), &[8, 16, 24]);
    assert!(feed(&mut t, &fr, 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::TooManyFrags, 4));
    assert!(t.is_empty());
    // Not the last, not a multiple of 8; and empty.
    let mut odd = frag4(&v4(2, 3, &payload(100)), &[40])[0].clone();
    odd.pop();
    odd[2..4].copy_from_slice(&59u16.to_be_bytes());
    let mut empty = frag4(&v4(2, 3, &payload(100)), &[40])[1].clone();
    empty.truncate(20);
    empty[2..4].copy_from_slice(&20u16.to_be_bytes());
    assert!(feed(&mut t, &[odd, empty], 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Bad, 2));
    assert!(t.is_empty());
}

#[test]
fn inconsistent_ends_drop_the_datagram() {
    let pkt = v4(2, 1, &payload(100));
    let fr = frag4(&pkt, &[48]);
    // A second last fragment ending elsewhere (0..40, no more).
    let short = frag4(&v4(2, 1, &payload(40)), &[])[0].clone();
    let mut t = Table::new(Limits::default(), false);
    assert!(feed(&mut t, &[fr[1].clone(), short], 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Inconsistent, 2));
    // Data past the end that a last fragment set.
    let long = frag4(&v4(2, 1, &payload(200)), &[104, 152])[1].clone();
    assert!(feed(&mut t, &[fr[1].clone(), long], 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Inconsistent, 2));
    assert!(t.is_empty());
}

#[test]
fn a_source_past_its_share_is_refused_and_a_full_table_evicts_the_oldest() {
    let lim = Limits { datagrams: 4, per_source: 2, ..Limits::default() };
    let mut t = Table::new(lim, false);
    let first = |src, id| frag4(&v4(src, id, &payload(64)), &[32])[0].clone();
    // Source 2 holds two; its third is refused.
    assert!(feed(&mut t, &[first(2, 1), first(2, 2), first(2, 3)], 0).is_empty());
    assert_eq!(counts(&mut t), only(Reason::SourceLimit, 1));
    // Others fill the table; a fifth datagram evicts the oldest (2, 1).
    assert!(feed(&mut t, &[first(3, 1), first(4, 1)], 1).is_empty());
    assert_eq!(t.len(), 4);
    assert!(feed(&mut t, &[first(5, 1)], 2).is_empty());
    assert_eq!(counts(&mut t), only(Reason::Evicted, 1));
    // (2, 1)'s last fragment starts over; (2, 2)'s completes.
    let last = |src, id| frag4(&v4(src, id, &payload(64)), &[32])[1].clone();
    let out = feed(&mut t, &[last(2, 2)], 3);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].bytes(), v4(2, 2, &payload(64)));
    // Source 2 has room again for a new one (one held: (2, 1) is gone).
    assert!(feed(&mut t, &[first(2, 9)], 3).is_empty());
    assert_eq!(counts(&mut t), [0; REASONS]);
}

#[test]
fn ipv6_shares_go_by_64() {
    let lim = Limits { per_source: 1, ..Limits::default() };
    let mut t = Table::new(lim, true);
    let data = payload(64);
    // ::3 and ::4 are in the same /64.
    let out = feed(
        &mut t,
        &[frag6(3, 1, 44, &[], &data, &[32])[0].clone(), frag6(4, 1, 44, &[], &data, &[32])[0].clone()],
        0,
    );
    assert!(out.is_empty());
    assert_eq!(counts(&mut t), only(Reason::SourceLimit, 1));
}

#[test]
fn not_fragments_are_not_parsed() {
    assert!(parse_v6(&v6(1, 50, &[], &payload(10))).is_none());
    assert!(parse_v6(&v6(1, 0, &[50, 0, 1, 4, 0, 0, 0, 0], &payload(10))).is_none());
    assert!(!is_fragment_v4(&v4(1, 1, &payload(10))));
    assert!(is_fragment_v4(&frag4(&v4(1, 1, &payload(100)), &[40])[1]));
    // Truncated.
    let f = frag6(3, 5, 44, &[], &payload(100), &[48])[0].clone();
    assert!(parse_v6(&f[..f.len() - 1]).is_none());
    assert!(parse_v6(&f[..44]).is_none());
}

proptest! {
    /// Any cut, order and duplication: each fragment is counted exactly
    /// once, and the datagram, when it comes, is the packet sent.
    #[test]
    fn fragments_are_conserved(
        n in 1usize..3000,
        cuts in proptest::collection::vec(1usize..375, 0..12),
        order in proptest::collection::vec(any::<proptest::sample::Index>(), 0..20),
        dups in proptest::collection::vec(any::<proptest::sample::Index>(), 0..3),
        v6_ in any::<bool>(),
    ) {
        let data = payload(n);
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c * 8).filter(|&c| c < n).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let (mut fr, whole) = if v6_ {
            (frag6(7, 3, 44, &[], &data, &cuts), v6(7, 50, &[], &data))
        } else {
            let p = v4(7, 3, &data);
            (frag4(&p, &cuts), p)
        };
        for d in &dups {
            let f = fr[d.index(fr.len())].clone();
            fr.push(f);
        }
        for (i, o) in order.iter().enumerate() {
            let j = o.index(fr.len());
            let i = i % fr.len();
            fr.swap(i, j);
        }
        let mut t = Table::new(Limits::default(), v6_);
        let out = feed(&mut t, &fr, 0);
        t.expire(u64::MAX);
        let c = t.take_counts();
        let counted: u64 = c.iter().sum::<u64>() + out.iter().map(|d| u64::from(d.frags)).sum::<u64>();
        prop_assert_eq!(counted, fr.len() as u64);
        // (Duplicates that come after the datagram completed may
        // complete it again.)
        if dups.is_empty() {
            prop_assert_eq!(out.len(), 1);
        }
        for d in &out {
            prop_assert_eq!(d.bytes(), whole.clone());
        }
    }
}
