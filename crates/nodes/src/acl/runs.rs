//! The ACL nodes' fast path: a batch cut into runs of one key ([`Runs`],
//! [`FlowSig`]: a packet whose key-relevant bytes equal its
//! predecessor's joins the run without building its key), and the
//! IPv4 flow pattern of the input and output shortcuts ([`Pattern`],
//! `crate::shortcut`). The reference is one key per packet ([`super::key`])
//! classified alone; `direct_tests` and this module's tests hold the two
//! to the same verdicts and counters.

use super::*;

/// The state of [`Runs::gather`] that opening a run changes.
struct Gather {
    nk: usize,
    /// The last interface looked up and its rule set.
    cached: Option<(u16, u16)>,
    same_set: bool,
    run_bytes: u64,
}

impl Runs {
    /// Cuts `pkts` into runs and fills their keys, sets and bytes; returns
    /// the number of runs, whether they all have one rule set, and whether
    /// a packet is traced. Specialised per family and direction. The loop
    /// keeps only what a packet joining the current run needs (its
    /// signature against the run's); opening a run is out of line.
    #[inline(never)]
    pub(super) fn gather<const V6: bool, const OUT: bool>(
        &mut self,
        pool: &PacketPool,
        ifs: &IfTable,
        pkts: &[PktIdx],
    ) -> (usize, bool, bool) {
        let n = pkts.len().min(MAX_BATCH);
        let mut g = Gather { nk: 0, cached: None, same_set: true, run_bytes: 0 };
        let mut flags_seen = 0u16;
        let pkts = pkts.get(..n).unwrap_or_default();
        let mut last_sig = FlowSig::NONE;
        let mut i = 0;
        while let Some(&p) = pkts.get(i) {
            let m = pool.meta(p);
            flags_seen |= m.flags;
            let sig = if V6 { FlowSig::NONE } else { FlowSig::of(pool, p, m, OUT) };
            i += 1;
            if sig.same_flow(&last_sig) {
                // A run goes on: follow it without building signatures.
                let (joined, bytes) = sig.follow::<OUT>(pool, m, pkts.get(i..).unwrap_or_default());
                g.run_bytes += u64::from(m.len) + bytes;
                i += joined;
                continue;
            }
            last_sig = sig;
            self.open::<V6, OUT>(&mut g, pool, ifs, i - 1, p, sig);
        }
        if let Some(last) = g.nk.checked_sub(1) {
            if let Some(b) = self.bytes.get_mut(last) {
                *b = g.run_bytes;
            }
            if let Some(s) = self.starts.get_mut(g.nk) {
                *s = n;
            }
        }
        (g.nk, g.same_set, flags_seen & flags::TRACED != 0)
    }

    /// Packet `i` (`p`) differs from the current run: it opens a run,
    /// unless (without a signature) its key is the run's.
    #[inline(never)]
    fn open<const V6: bool, const OUT: bool>(
        &mut self,
        g: &mut Gather,
        pool: &PacketPool,
        ifs: &IfTable,
        i: usize,
        p: PktIdx,
        sig: FlowSig,
    ) {
        let m = pool.meta(p);
        let len = u64::from(m.len);
        let (rx_if, vlan) = (m.rx_if, m.vlan);
        let out_if = if OUT { m.tx_if } else { 0 };
        let ifindex = if OUT { out_if } else { rx_if };
        let set = match g.cached {
            Some((i, s)) if i == ifindex => s,
            _ => {
                let s = ifs.get(ifindex).and_then(|f| if OUT { f.acl_out } else { f.acl_in }).unwrap_or(NO_SET);
                g.cached = Some((ifindex, s));
                s
            }
        };
        let nk = g.nk;
        // The key is built in its slot (a key is 64 bytes: building it
        // aside and moving it in cost IPv6 ~25 instructions a packet). A
        // batch has at most `MAX_BATCH` packets, so runs, and the vectors
        // hold as many: the slots are there.
        if sig.valid() {
            if let Some(k) = self.keys.get_mut(nk) {
                *k = sig.key();
            }
        } else {
            let l3 = pool.data(p).get(usize::from(m.l3_off)..).unwrap_or_default();
            let Some(k) = self.keys.get_mut(nk) else { return };
            *k = if V6 { key_v6(l3) } else { key_v4(l3) };
            k.in_if = rx_if;
            k.out_if = out_if;
            k.vlan = vlan;
            // Without a signature the key itself tells a run apart (IPv6,
            // IPv4 options); with one, a different signature is taken as a
            // different key (at worst a run cut in two).
            if nk > 0 && self.sets.get(nk - 1) == Some(&set) && self.keys.get(nk - 1) == self.keys.get(nk) {
                g.run_bytes += len;
                return;
            }
        }
        if nk > 0
            && let Some(b) = self.bytes.get_mut(nk - 1)
        {
            *b = g.run_bytes;
        }
        g.run_bytes = len;
        if let Some(s) = self.sets.get_mut(nk) {
            *s = set;
        }
        if let Some(s) = self.starts.get_mut(nk) {
            *s = i;
        }
        g.same_set &= self.sets.first().is_some_and(|&first| first == set);
        g.nk = nk + 1;
    }

    /// Next nodes and rule counters of the runs' packets, from the
    /// verdicts.
    pub(super) fn apply(
        &self,
        cx: &mut Cx<'_>,
        acls: &AclTable,
        nk: usize,
        same_set: bool,
        pkts: &[PktIdx],
        next: &mut [u16],
    ) {
        let worker = usize::from(cx.worker);
        let one_set = if same_set { self.sets.first().and_then(|&s| acls.get(s)) } else { None };
        let runs = self.keys.iter().zip(&self.verdicts).zip(self.bytes.iter()).zip(self.starts.windows(2)).take(nk);
        if let Some(set) = one_set {
            // One rule set (the usual case): accept by default, then drop
            // the denied runs; runs decided by the same rule (the default,
            // mostly) are counted in one update.
            next.fill(1);
            let counters = set.counters.get(worker);
            let mut acc: (Option<u32>, u64, u64) = (None, 0, 0);
            for (((key, v), &b), w) in runs {
                let &[start, end] = w else { continue };
                let packets = (end - start) as u64;
                if let Some(c) = counters {
                    if v.counted() {
                        c.record_n(&set.classifier, key, v, packets, b);
                    } else if v.rule == acc.0 {
                        acc.1 += packets;
                        acc.2 += b;
                    } else {
                        c.add_n(acc.0, acc.1, acc.2);
                        acc = (v.rule, packets, b);
                    }
                }
                if v.action == Action::Drop
                    && let (Some(o), Some(ps)) = (next.get_mut(start..end), pkts.get(start..end))
                {
                    for (o, &p) in o.iter_mut().zip(ps) {
                        *o = cx.drop(p, AclError::Denied);
                    }
                }
            }
            if let Some(c) = counters
                && acc.1 != 0
            {
                c.add_n(acc.0, acc.1, acc.2);
            }
            return;
        }
        for ((((key, v), &b), w), &s) in runs.zip(&self.sets) {
            let &[start, end] = w else { continue };
            let (Some(o), Some(ps)) = (next.get_mut(start..end), pkts.get(start..end)) else { continue };
            let Some(set) = acls.get(s) else {
                for (o, &p) in o.iter_mut().zip(ps) {
                    *o = cx.drop(p, AclError::NoSet);
                }
                continue;
            };
            if let Some(c) = set.counters.get(worker) {
                c.record_n(&set.classifier, key, v, (end - start) as u64, b);
            }
            for (o, &p) in o.iter_mut().zip(ps) {
                *o = match v.action {
                    Action::Accept => AclNext::Pass as u16,
                    Action::Drop => cx.drop(p, AclError::Denied),
                };
            }
        }
    }

    /// Trace notes of the traced packets: the rule set and what decided.
    #[cold]
    pub(super) fn trace(&self, cx: &mut Cx<'_>, acls: &AclTable, nk: usize, pkts: &[PktIdx]) {
        for ((v, &s), w) in self.verdicts.iter().zip(&self.sets).zip(self.starts.windows(2)).take(nk) {
            let (Some(set), &[start, end]) = (acls.get(s), w) else { continue };
            let (v, name) = (*v, &set.name);
            for &p in pkts.get(start..end).unwrap_or_default() {
                cx.trace_note(p, || {
                    format!(
                        "acl {name}: {:?} by {}",
                        v.action,
                        v.rule.map_or("default".into(), |r| format!("rule {r}"))
                    )
                });
            }
        }
    }
}

/// An accepted IPv4 flow's pattern, which `ip4-input` keeps at hand during
/// a batch ([`crate::shortcut`]): metadata bytes 0-15 under
/// [`crate::shortcut::SHORTCUT_META`] (receiving interface, L3 offset, VLAN), the header bytes of [`header_lanes`], the TCP flags when
/// TCP. Only for headers without options followed by 14 transport bytes
/// ([`FlowSig`]). Without a flow, header byte 0 is 0, which no packet that
/// asks has (they are 0x45).
#[derive(Clone, Copy)]
pub(crate) struct Pattern {
    meta: Bytes16,
    h0: Bytes16,
    h1: Bytes16,
    tcp_flags: Option<u8>,
}

/// The header bytes of [`FlowSig`]'s masks plus the total length (bytes
/// 2-3), in two lanes: bytes 0-7 (the high half zero), bytes 8-23. In
/// lanes 2 and 3 only the total length counts (the second lane's bytes 10
/// and 11, the checksum, are masked), so a packet that differs there
/// alone is the flow's at another length ([`Pattern::OTHER_LEN`]).
const SHORTCUT_W0: u64 = MASK_W0 | 0xffff << 16;
#[inline(always)]
fn header_lanes(h: &[u8; 34]) -> (Bytes16, Bytes16) {
    // Sixteen bytes at 0 with the high half masked off: one load and one
    // AND (an 8-byte load became a scalar AND with a 64-bit constant).
    let h0 = h.first_chunk::<16>().unwrap_or(&[0; 16]);
    let h1 = h.get(8..).and_then(|r| r.first_chunk::<16>()).unwrap_or(&[0; 16]);
    (
        Bytes16::load(h0).and(Bytes16::from_words(SHORTCUT_W0, 0)),
        Bytes16::load(h1).and(Bytes16::from_words(MASK_W1, !0)),
    )
}

impl Pattern {
    /// The bits of the total length (header bytes 2 and 3), which the
    /// masks leave alone in those lanes.
    pub(crate) const OTHER_LEN: u16 = 0b1100;
}

impl FlowPattern for Pattern {
    /// An IPv4 header without options with its first 14 transport bytes.
    type Head = [u8; 34];
    const KEY_BYTES: usize = 34;
    const NONE: Pattern = Pattern { meta: Bytes16::ZERO, h0: Bytes16::ZERO, h1: Bytes16::ZERO, tcp_flags: None };
    const ACL_NEXT: u16 = crate::ip4::Ip4InputNext::AclIn as u16;
    const LOOKUP_NEXT: u16 = crate::ip4::Ip4InputNext::Lookup as u16;
    const PUNT_ACL_NEXT: u16 = crate::ip4::Ip4InputNext::PuntAcl as u16;

    /// Multicast or broadcast for Linux.
    #[inline(always)]
    fn punted(n: u16) -> bool {
        n == crate::ip4::Ip4InputNext::Punt as u16
    }

    #[inline(always)]
    fn compare(&self, meta: Bytes16, h: &[u8; 34]) -> u16 {
        let (h0, h1) = header_lanes(h);
        meta_masked(meta).eq(self.meta).and(h0.eq(self.h0)).and(h1.eq(self.h1)).top_bits()
    }

    #[inline(always)]
    fn other_len(&self, bits: u16, _meta: Bytes16, _h: &[u8; 34]) -> bool {
        bits | Pattern::OTHER_LEN == SAME
    }

    #[inline(always)]
    fn tcp_flags(&self) -> Option<u8> {
        self.tcp_flags
    }

    #[inline(always)]
    fn head(l3: &[u8]) -> Option<(&[u8; 34], u8)> {
        let h = l3.first_chunk::<34>()?;
        Some((h, h[33]))
    }

    fn of(m: &Meta, l3: &[u8]) -> Option<(Pattern, PacketKey)> {
        let h = l3.first_chunk::<34>()?;
        let sig = FlowSig::v4(h, m.rx_if, 0, m.vlan);
        if !sig.valid() {
            return None;
        }
        let (h0, h1) = header_lanes(h);
        let pattern = Pattern { meta: meta_masked(meta16(m)), h0, h1, tcp_flags: (h[9] == 6).then_some(h[33]) };
        Some((pattern, sig.key()))
    }
}

/// [`FlowSig`]'s masks of header words 0 and 1.
const MASK_W0: u64 = 0xffff_0000_0000_ffff;
const MASK_W1: u64 = 0xffff_ffff_0000_ff00;

// Every bit the key reads ([`key::KEY_BITS_V4`]) is compared, checked when
// compiling: by [`FlowSig`]'s words and `follow` (bytes 0-15 under the
// masks, 16-23 whole, the TCP flags, byte 33, on their own) and by the
// shortcut's [`Pattern`] (its lanes: bytes 0-7 under `SHORTCUT_W0`, 8-15
// under `MASK_W1`, 16-23 whole); bytes 24-32 hold none.
const _: () = {
    use key::{KEY_BITS_V4, covers};
    assert!(covers(MASK_W0, &KEY_BITS_V4, 0) && covers(MASK_W1, &KEY_BITS_V4, 8) && covers(!0, &KEY_BITS_V4, 16));
    assert!(covers(SHORTCUT_W0, &KEY_BITS_V4, 0));
    assert!(covers(0, &KEY_BITS_V4, 24) && covers(0xff << 56, &KEY_BITS_V4, 26));
};

/// A packet's metadata bytes 0-7 and 8-15 as little-endian words (read
/// field by field; the compiler makes it one 16-byte load).
#[inline(always)]
fn meta_words(m: &Meta) -> (u64, u64) {
    let w0 = u64::from(m.off) | u64::from(m.len) << 16 | u64::from(m.rx_if) << 32 | u64::from(m.tx_if) << 48;
    let w1 = u64::from(m.l3_off) | u64::from(m.vlan) << 16 | u64::from(m.error) << 32 | u64::from(m.flags) << 48;
    (w0, w1)
}

/// A header's little-endian word at byte `at`.
#[inline(always)]
fn word(h: &[u8; 34], at: usize) -> u64 {
    // `at` is a constant after inlining: one load, no check.
    u64::from_le_bytes(h.get(at..).and_then(|w| w.first_chunk::<8>()).copied().unwrap_or_default())
}

/// The header bytes and interfaces an IPv4 packet's key is made of, read
/// as three words and compared as a whole: two packets with equal
/// signatures have equal keys. Only for headers without options followed
/// by at least 14 transport bytes, so that every transport field the key
/// reads is present (shorter packets and options take the full path).
#[derive(Clone, Copy)]
struct FlowSig {
    /// Bytes 0-1 (version, IHL, DSCP/ECN) and 6-7 (flags, fragment offset).
    a: u64,
    /// Byte 9 (protocol), bytes 12-15 (source).
    b: u64,
    /// Bytes 16-23: destination, first transport word (ports, ICMP type
    /// and code).
    c: u64,
    /// TCP flags (TCP only), interfaces and VLAN; bit 63: no signature.
    d: u64,
}

impl FlowSig {
    /// No signature: the packet takes the full path.
    const NONE: FlowSig = FlowSig { a: 0, b: 0, c: 0, d: 1 << 63 };

    /// The signature of packet `p` (`m`, IPv4), read in place without
    /// slicing the data: it needs 34 bytes of L3 within the packet's length.
    #[inline(always)]
    fn of(pool: &PacketPool, p: PktIdx, m: &Meta, out: bool) -> FlowSig {
        let out_if = if out { m.tx_if } else { 0 };
        let l3_off = usize::from(m.l3_off);
        match pool.frame(p).get(usize::from(m.off) + l3_off..) {
            Some(l3) if l3_off + 34 <= usize::from(m.len) => FlowSig::v4(l3, m.rx_if, out_if, m.vlan),
            _ => FlowSig::NONE,
        }
    }

    /// How many of `pkts` continue the run of signature `self` (valid),
    /// and their bytes; `m` is the metadata of the run's packet just
    /// before them. A traced packet ends the run, so that the caller sees
    /// its flags. Each packet is compared where it lies, without building
    /// its signature, as three 16-byte chains ([`Bytes16`]): its metadata
    /// against `m`'s (data and L3 offsets, so that its header lies where
    /// `m`'s does; interfaces, VLAN, the traced flag, the length), its
    /// header bytes 0-15 and 16-31 against the run's masked words (whose
    /// version and header length, 0x45, are among them); for TCP the flags
    /// byte. Two packets share one test. A packet of another length joins
    /// through a slower check (all else equal, 34 bytes of L3 as
    /// [`FlowSig::of`] asks) and the run goes on at its length; one with
    /// other offsets ends the run here and rejoins it through its
    /// signature.
    ///
    /// Measured (callgrind, instructions per packet of `tern-bench engine
    /// --packets 1000000 --scenario single-flow-50fw`): 55.8 in the
    /// previous loop (five 64-bit words, the header's bounds and length
    /// checked per packet, the length added per packet), 34 with the
    /// 16-byte chains, 25.6 with the length in the pattern and pairs, 24.7
    /// with the pairs as `as_chunks` (no index overflow checks); four at a
    /// time was no better.
    #[inline(never)]
    fn follow<const OUT: bool>(&self, pool: &PacketPool, m: &Meta, pkts: &[PktIdx]) -> (usize, u64) {
        if (self.b >> 8) as u8 == 6 {
            self.follow_as::<OUT, true>(pool, m, pkts)
        } else {
            self.follow_as::<OUT, false>(pool, m, pkts)
        }
    }

    #[inline(always)]
    fn follow_as<const OUT: bool, const TCP: bool>(
        &self,
        pool: &PacketPool,
        m: &Meta,
        pkts: &[PktIdx],
    ) -> (usize, u64) {
        // Metadata bytes 0-7 (`off`, `len`, `rx_if`, `tx_if`) and 8-15
        // (`l3_off`, `vlan`, `error`, `flags`): what counts of them. The
        // length is compared too, so that a run of one length (the usual
        // case) is counted without a per-packet addition; a packet of
        // another length (at least 34 bytes of L3) goes on with the run
        // through the slower check below.
        let keep0 = 0xffff | 0xffff << 32 | if OUT { 0xffff << 48 } else { 0 };
        let keep1 = 0xffff | 0xffff << 16 | u64::from(flags::TRACED) << 48;
        let len_bits = 0xffff << 16;
        let (w0, w1) = meta_words(m);
        let meta_mask = Bytes16::from_words(keep0 | len_bits, keep1);
        let other_len = Bytes16::from_words(!len_bits, !0);
        // Not traced: a traced packet differs.
        let mut meta_want =
            Bytes16::from_words(w0 & (keep0 | len_bits), w1 & keep1 & !(u64::from(flags::TRACED) << 48));
        let (h0_want, h0_mask) = (Bytes16::from_words(self.a, self.b), Bytes16::from_words(MASK_W0, MASK_W1));
        let (h1_want, h1_mask) = (Bytes16::from_words(self.c, 0), Bytes16::from_words(!0, 0));
        let hoff = usize::from(m.off) + usize::from(m.l3_off);
        let need = m.l3_off.saturating_add(34);
        let tcp_flags = self.d as u8;
        // Packet `p` against the pattern: the differing bits (all set when
        // its header is out of the frame), whether its TCP flags are the
        // run's, its length.
        let diff = |p: PktIdx, meta_want: Bytes16| -> (Bytes16, bool, u16) {
            let m = pool.meta(p);
            let (w0, w1) = meta_words(m);
            let Some(h) = pool.frame(p).get(hoff..).and_then(|h| h.first_chunk::<34>()) else {
                return (Bytes16::from_words(!0, !0), false, 0);
            };
            let (h0, rest) = h.split_first_chunk::<16>().unwrap_or((&[0; 16], &[]));
            let h1 = rest.first_chunk::<16>().unwrap_or(&[0; 16]);
            let x = Bytes16::from_words(w0, w1)
                .xor(meta_want)
                .and(meta_mask)
                .or(Bytes16::load(h0).xor(h0_want).and(h0_mask))
                .or(Bytes16::load(h1).xor(h1_want).and(h1_mask));
            (x, !TCP || h[33] == tcp_flags, m.len)
        };
        let n = pkts.len();
        // Bytes: those of the segments of one length before `seg_start`,
        // then `seg_len` per packet.
        let (mut bytes, mut seg_start, mut seg_len) = (0u64, 0usize, u64::from(m.len));
        let mut j = 0;
        loop {
            // Two at a time while both match (one test for the pair).
            for &[p, q] in pkts.get(j..).unwrap_or_default().as_chunks::<2>().0 {
                let (xp, tp, _) = diff(p, meta_want);
                let (xq, tq, _) = diff(q, meta_want);
                if !(xp.or(xq).is_zero() && tp && tq) {
                    break;
                }
                j += 2;
            }
            let Some(&p) = pkts.get(j) else { break };
            let (x, t, len) = diff(p, meta_want);
            if !t {
                break;
            }
            if !x.is_zero() {
                // Another length, all else the run's: a new segment.
                let want = meta_want.and(other_len).or(Bytes16::from_words(u64::from(len) << 16, 0));
                if len < need || !diff(p, want).0.is_zero() {
                    break;
                }
                bytes += (j - seg_start) as u64 * seg_len;
                (seg_start, seg_len, meta_want) = (j, u64::from(len), want);
            }
            j += 1;
        }
        let j = j.min(n);
        (j, bytes + (j - seg_start) as u64 * seg_len)
    }

    #[inline(always)]
    fn v4(l3: &[u8], rx_if: u16, out_if: u16, vlan: u16) -> FlowSig {
        let Some(h) = l3.first_chunk::<34>() else { return FlowSig::NONE };
        let flags = if h[9] == 6 { h[33] } else { 0 };
        let d = u64::from(flags) | u64::from(rx_if) << 8 | u64::from(out_if) << 24 | u64::from(vlan) << 40;
        FlowSig {
            a: word(h, 0) & MASK_W0,
            b: word(h, 8) & MASK_W1,
            c: word(h, 16),
            d: if h[0] == 0x45 { d } else { FlowSig::NONE.d },
        }
    }

    /// The key of the packets with this signature: what [`key_v4`] reads
    /// from their headers, plus the interfaces and VLAN.
    #[inline(always)]
    fn key(&self) -> PacketKey {
        // Byte `i` of a word is header byte `8 * word + i` (little endian).
        let byte = |w: u64, i: u32| (w >> (8 * i)) as u8;
        let (a, b, c) = (self.a, self.b, self.c);
        let proto = byte(b, 1);
        let mut k = PacketKey {
            src: u128::from(((b >> 32) as u32).swap_bytes()),
            dst: u128::from((c as u32).swap_bytes()),
            proto,
            dscp: byte(a, 1) >> 2,
            in_if: (self.d >> 8) as u16,
            out_if: (self.d >> 24) as u16,
            vlan: (self.d >> 40) as u16,
            ..PacketKey::default()
        };
        if u16::from_be_bytes([byte(a, 6), byte(a, 7)]) & 0x1fff == 0 {
            match proto {
                6 | 17 | 33 | 132 | 136 => {
                    k.sport = u16::from_be_bytes([byte(c, 4), byte(c, 5)]);
                    k.dport = u16::from_be_bytes([byte(c, 6), byte(c, 7)]);
                    k.tcp_flags = if proto == 6 { self.d as u8 } else { 0 };
                    k.l4_valid = true;
                }
                1 | 58 => {
                    k.icmp_type = byte(c, 4);
                    k.icmp_code = byte(c, 5);
                    k.l4_valid = true;
                }
                _ => {}
            }
        }
        k
    }

    #[inline(always)]
    fn valid(&self) -> bool {
        self.d & 1 << 63 == 0
    }

    /// Whether both have a signature and it is the same.
    #[inline(always)]
    fn same_flow(&self, o: &FlowSig) -> bool {
        (self.a ^ o.a) | (self.b ^ o.b) | (self.c ^ o.c) | (self.d ^ o.d) | (self.d & 1 << 63) == 0
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::super::key::key_v6_walked;
    use super::*;
    use crate::state::{AclSet, IfKind, Iface, link_local_from_mac};
    use tern_engine::graph::Env;
    use tern_engine::trace::Tracer;
    use tern_engine::{GraphBuilder, NEXT_TAKEN, TraceShared, WorkerStats};
    use tern_packet::PoolConfig;
    use tern_rcu::Published;

    /// Takes what the firewall accepts, in order.
    struct Sink(&'static str);
    impl Node for Sink {
        fn name(&self) -> &'static str {
            self.0
        }
        fn nexts(&self) -> &'static [&'static str] {
            &["drop"]
        }
        fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
            cx.tx[0].extend_from_slice(pkts);
            next.fill(NEXT_TAKEN);
        }
    }

    fn iface(index: u16, set: Option<u16>) -> Iface {
        let mac = [2, 0, 0, 0, 0, index as u8];
        Iface {
            index,
            name: format!("if{index}"),
            kind: IfKind::Port,
            port: index,
            mac,
            mtu: 1500,
            up: true,
            v4: vec![],
            v6: vec![],
            v6_ll: link_local_from_mac(mac),
            acl_in: set,
            acl_out: set,
            vmacs: Vec::new(),
        }
    }

    /// Batches of a few flows in runs (and options, fragments, short
    /// transport headers, TCP flags, ICMP, three interfaces: two rule sets
    /// and a missing one; lengths and L3 offsets varying within a flow)
    /// give the same next nodes, drop reasons and rule
    /// counters as classifying and counting one packet at a time.
    #[test]
    fn runs_decide_and_count_like_one_packet_at_a_time() {
        for out in [false, true] {
            // All interfaces mixed in a batch, then one rule set at a time.
            for only in [None, Some(0), Some(1)] {
                runs_case(out, only);
            }
        }
    }

    fn runs_case(out: bool, only: Option<u16>) {
        let sets = tern_acl::parse_toml(
            r#"
[[acl]]
name = "A"
default = "accept"
[[acl.rule]]
action = "count"
proto = "udp"
[[acl.rule]]
action = "accept"
dport = [53, "1000-2000"]
[[acl.rule]]
action = "count"
src = "192.0.2.0/28"
[[acl.rule]]
action = "drop"
src = "10.0.0.0/8"
[[acl.rule]]
action = "drop"
proto = "icmp"
icmp_type = 8

[[acl]]
name = "B"
default = "drop"
[[acl.rule]]
action = "accept"
proto = "tcp"
[[acl.rule]]
action = "count"
dport = "0-100"
"#,
        )
        .expect("rules");
        let mut table = AclTable::default();
        for set in &sets {
            let classifier = tern_acl::compile(set, &|_| None).expect("compile");
            let counters = vec![tern_acl::RuleCounters::for_classifier(&classifier)];
            table.sets.push(AclSet { name: set.name.clone(), classifier, counters });
        }
        let acls = Published::new(table);
        let ifs = Published::new(IfTable::new(vec![iface(0, Some(0)), iface(1, Some(1)), iface(2, Some(7))]));
        let mut b = GraphBuilder::new();
        let acl_id = b.add(AclNode::new(ifs.snapshot(), acls.snapshot(), false, out));
        b.add(Sink(if out { "interface-output" } else { "ip4-lookup" }));
        let mut graph = b.build().expect("graph");
        let info = graph.info().clone();
        let node = if out { "ip4-acl-out" } else { "ip4-acl-in" };
        let denied = info.error_id(node, "denied").expect("denied") as usize;
        let no_set = info.error_id(node, "no-rule-set").expect("no-rule-set") as usize;

        // Flow templates: (interface, L3 bytes).
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut flows: Vec<(u16, Vec<u8>)> = Vec::new();
        for f in 0..40 {
            let proto = [17u8, 6, 1, 47][f % 4];
            let ihl = if f % 7 == 3 { 6 } else { 5 };
            let len = match f % 9 {
                4 => ihl * 4 + 2,
                5 => ihl * 4 + 10,
                _ => ihl * 4 + 30,
            };
            let mut h = vec![0u8; len];
            h[0] = 0x40 | ihl as u8;
            h[1] = (rnd() as u8) & 0xfc;
            h[9] = proto;
            let src = if f % 3 == 0 { [10, 1, 2, 3] } else { [192, 0, 2, f as u8] };
            h[12..16].copy_from_slice(&src);
            h[16..20].copy_from_slice(&[198, 18, 0, 1]);
            if f % 11 == 6 {
                h[6] = 0x00;
                h[7] = 0x10; // a later fragment
            }
            let l4 = ihl * 4;
            let dport: u16 = [53, 1500, 80, 9999, 7][f % 5];
            for (i, b) in h.iter_mut().enumerate().skip(l4) {
                *b = rnd() as u8;
                if i == l4 + 2 || i == l4 + 3 {
                    *b = dport.to_be_bytes()[i - l4 - 2];
                }
            }
            if proto == 1 {
                h[l4] = if f % 2 == 0 { 8 } else { 0 };
            }
            flows.push((only.unwrap_or((f % 3) as u16), h));
        }

        let mut pool = PacketPool::new(PoolConfig { frames: 1024, ..PoolConfig::default() }).expect("pool");
        let mut pkts = Vec::new();
        while pkts.len() < 700 {
            let (ifindex, l3) = &flows[rnd() as usize % flows.len()];
            let run = 1 + rnd() as usize % 6;
            for _ in 0..run {
                // The link-layer header's length (so the L3 offset) varies
                // within a flow now and then (a VLAN tag).
                let l2 = if rnd() % 8 == 0 { 18 } else { 14 };
                let mut frame = vec![0u8; l2];
                frame.extend_from_slice(l3);
                // Bytes outside the key vary within a flow.
                frame[l2 + 8] = rnd() as u8;
                frame[l2 + 10] = rnd() as u8;
                // So do the lengths (bytes after the IPv4 total length).
                frame.resize(frame.len() + rnd() as usize % 3, 0);
                let p = pool.alloc_from(&frame).expect("buffer");
                let m = pool.meta_mut(p);
                m.l3_off = l2 as u16;
                if out {
                    m.tx_if = *ifindex;
                    m.rx_if = 3;
                } else {
                    m.rx_if = *ifindex;
                }
                pkts.push(p);
            }
        }

        // The reference: one packet at a time, as the node did before runs.
        let table = acls.load();
        let reference: Vec<tern_acl::RuleCounters> =
            table.sets.iter().map(|s| tern_acl::RuleCounters::for_classifier(&s.classifier)).collect();
        let (mut want_pass, mut want_denied, mut want_no_set) = (Vec::new(), 0u64, 0u64);
        for &p in &pkts {
            let m = *pool.meta(p);
            let mut k = key_v4(&pool.data(p)[usize::from(m.l3_off)..]);
            k.in_if = m.rx_if;
            k.out_if = if out { m.tx_if } else { 0 };
            let ifindex = if out { m.tx_if } else { m.rx_if };
            let Some(s) = [Some(0u16), Some(1), Some(7)][usize::from(ifindex)].filter(|&s| s < 2) else {
                want_no_set += 1;
                continue;
            };
            let set = &table.sets[usize::from(s)];
            let v = set.classifier.classify(&k);
            reference[usize::from(s)].record(&set.classifier, &k, &v, u32::from(m.len));
            match v.action {
                tern_acl::Action::Accept => want_pass.push(p),
                tern_acl::Action::Drop => want_denied += 1,
            }
        }

        let stats = WorkerStats::new(info.nodes.len(), info.errors.len(), 1);
        let mut tx = vec![Vec::new()];
        let mut tracer = Tracer::new(TraceShared::new(), 0);
        graph.input_mut(acl_id).extend_from_slice(&pkts);
        let mut env = Env {
            pool: &mut pool,
            stats: &stats,
            tx: &mut tx,
            tracer: &mut tracer,
            now_ns: 0,
            worker: 0,
            capture_node: None,
        };
        graph.run(&mut env);

        assert!(
            want_denied > 20 && want_pass.len() > 50,
            "a varied mix: {want_denied} denied, {} passed",
            want_pass.len()
        );
        assert_eq!(want_no_set > 20, only.is_none());
        assert_eq!(tx[0], want_pass, "accepted packets, in order");
        assert_eq!(stats.errors[denied].get(), want_denied);
        assert_eq!(stats.errors[no_set].get(), want_no_set);
        for (set, r) in table.sets.iter().zip(&reference) {
            assert_eq!(set.counters[0].snapshot(), r.snapshot(), "rule counters of {}", set.name);
        }
    }

    /// A run followed without signatures ([`FlowSig::follow`]) ends at the
    /// first packet that differs in any byte or field the key is made of
    /// (and at a traced packet), and goes on over bytes outside the key.
    #[test]
    fn follow_stops_at_every_key_field() {
        let mut pool = PacketPool::new(PoolConfig { frames: 64, ..PoolConfig::default() }).expect("pool");
        for proto in [6u8, 17, 1] {
            let mut h = [0u8; 14 + 40];
            h[14] = 0x45;
            h[14 + 1] = 0x28;
            h[14 + 9] = proto;
            h[14 + 12..14 + 24].copy_from_slice(&[192, 0, 2, 1, 198, 18, 0, 1, 0x04, 0xd2, 0x00, 0x35]);
            h[14 + 33] = 0x12;
            let alloc = |pool: &mut PacketPool, h: &[u8], rx: u16, tx: u16, vlan: u16, fl: u16| {
                let p = pool.alloc_from(h).expect("buffer");
                let m = pool.meta_mut(p);
                (m.l3_off, m.rx_if, m.tx_if, m.vlan, m.flags) = (14, rx, tx, vlan, fl);
                p
            };
            for out in [false, true] {
                let head = alloc(&mut pool, &h, 1, 2, 3, 0);
                let sig = FlowSig::of(&pool, head, pool.meta(head), out);
                assert!(sig.valid());
                let follow = |pool: &PacketPool, p| {
                    let m = pool.meta(head);
                    let r = if out { sig.follow::<true>(pool, m, &[p]) } else { sig.follow::<false>(pool, m, &[p]) };
                    r.0 == 1
                };
                // Outside the key: total length, identification, TTL,
                // checksum, payload (and byte 33 unless TCP).
                for at in [2usize, 3, 4, 5, 8, 10, 11, 24, 30, 33, 39] {
                    let mut o = h;
                    o[14 + at] ^= 0x5a;
                    let p = alloc(&mut pool, &o, 1, 2, 3, 0);
                    assert_eq!(follow(&pool, p), at != 33 || proto != 6, "proto {proto} byte {at}");
                    pool.free(p);
                }
                // In the key: version/IHL, DSCP/ECN, flags/fragment offset,
                // protocol, addresses, ports or ICMP type/code.
                for at in [0usize, 1, 6, 7, 9, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23] {
                    let mut o = h;
                    o[14 + at] ^= 0x01;
                    let p = alloc(&mut pool, &o, 1, 2, 3, 0);
                    assert!(!follow(&pool, p), "proto {proto} byte {at}");
                    pool.free(p);
                }
                // Interfaces (the output one only for output sets), VLAN,
                // tracing, and a header shorter than the signature's.
                for (rx, tx, vlan, fl, joins) in [
                    (1, 2, 3, 0, true),
                    (9, 2, 3, 0, false),
                    (1, 9, 3, 0, !out),
                    (1, 2, 9, 0, false),
                    (1, 2, 3, flags::TRACED, false),
                    (1, 2, 3, flags::L3_CSUM_OK, true),
                ] {
                    let p = alloc(&mut pool, &h, rx, tx, vlan, fl);
                    assert_eq!(follow(&pool, p), joins, "proto {proto} ifs {rx} {tx} {vlan} {fl}");
                    pool.free(p);
                }
                let p = alloc(&mut pool, &h[..14 + 33], 1, 2, 3, 0);
                assert!(!follow(&pool, p));
                pool.free(p);
                pool.free(head);
            }
        }
    }

    proptest::proptest! {
        /// [`key_v6`]'s way past the walk gives the walked key, for every
        /// next header (extension headers, TCP, UDP, ICMPv6, ESP, No Next
        /// Header, anything) and any bytes and length after the header.
        #[test]
        fn key_v6_without_the_walk_is_the_walked_key(
            head in proptest::collection::vec(proptest::prelude::any::<u8>(), 40),
            next in proptest::prelude::prop_oneof![
                proptest::prelude::Just(6u8), proptest::prelude::Just(17u8), proptest::prelude::Just(58u8),
                proptest::prelude::Just(0u8), proptest::prelude::Just(43u8), proptest::prelude::Just(44u8),
                proptest::prelude::Just(50u8), proptest::prelude::Just(51u8), proptest::prelude::Just(59u8),
                proptest::prelude::Just(60u8), proptest::prelude::any::<u8>(),
            ],
            rest in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
        ) {
            let mut l3 = head;
            l3[6] = next;
            l3.extend_from_slice(&rest);
            proptest::prop_assert_eq!(key_v6(&l3), key_v6_walked(&l3));
        }
    }

    /// The shortcut's pattern (`ip4-input`'s accepted flow) takes a packet
    /// only when every byte of the key, the total length, the receiving
    /// interface, VLAN and L3 offset agree and it is not traced; another
    /// total length alone makes it the flow's at another length; bytes
    /// outside the key do not matter.
    #[test]
    fn shortcut_pattern_sees_every_key_field() {
        for proto in [6u8, 17, 1] {
            let mut h = [0u8; 34];
            h[0] = 0x45;
            h[9] = proto;
            h[12..24].copy_from_slice(&[192, 0, 2, 1, 198, 18, 0, 1, 0x04, 0xd2, 0x00, 0x35]);
            h[33] = 0x12;
            let m = Meta { off: 64, len: 14 + 60, rx_if: 1, tx_if: 2, l3_off: 14, vlan: 3, ..Meta::default() };
            let (h0, h1) = header_lanes(&h);
            let meta = meta_masked(meta16(&m));
            let p = Pattern { meta, h0, h1, tcp_flags: (proto == 6).then_some(h[33]) };
            let takes = |m: &Meta, h: &[u8; 34]| p.compare(meta16(m), h) == SAME && p.tcp_agrees(h[33]);
            let other_len = |m: &Meta, h: &[u8; 34]| {
                let b = p.compare(meta16(m), h);
                b != SAME && p.other_len(b, meta16(m), h) && p.tcp_agrees(h[33])
            };
            assert!(takes(&m, &h), "proto {proto}");
            assert!(Pattern::NONE.compare(meta16(&m), &h) != SAME);
            for at in 0..34 {
                let mut o = h;
                o[at] ^= 0x01;
                let key = matches!(at, 0 | 1 | 6 | 7 | 9 | 12..=23) || (at == 33 && proto == 6);
                let length = matches!(at, 2 | 3);
                assert_eq!(takes(&m, &o), !key && !length, "proto {proto} byte {at}");
                assert_eq!(other_len(&m, &o), length, "proto {proto} byte {at}");
            }
            let (flow, not_flow) = crate::shortcut::meta_variants(&m);
            for (what, o) in flow {
                assert!(!takes(&o, &h) && !other_len(&o, &h), "proto {proto}: {what}");
            }
            for (what, o) in not_flow {
                assert!(takes(&o, &h), "proto {proto}: {what}");
            }
            for tot in [61u16, 1500, 60 + 256] {
                let mut o = h;
                o[2..4].copy_from_slice(&tot.to_be_bytes());
                assert!(!takes(&m, &o) && other_len(&m, &o), "proto {proto}: total length {tot}");
            }
        }
    }

    /// The lists of the bits a key reads ([`key::KEY_BITS_V4`],
    /// [`KEY_BITS_V6`]), which the caches' masks are checked against when
    /// compiling, are exactly the bits whose flip changes `key_v4` or
    /// `key_v6` of a first fragment of some protocol (TCP, UDP, ICMP or
    /// ICMPv6).
    #[test]
    fn key_bits_are_what_the_keys_read() {
        for v6 in [false, true] {
            let mut read = vec![0u8; if v6 { 54 } else { 34 }];
            for proto in [6u8, 17, if v6 { 58 } else { 1 }] {
                let mut h = vec![0u8; read.len()];
                if v6 {
                    (h[0], h[6], h[8], h[24]) = (0x60, proto, 0x20, 0x20);
                    h[40..44].copy_from_slice(&[0x04, 0xd2, 0x00, 0x35]);
                    h[53] = 0x12;
                } else {
                    (h[0], h[1], h[9]) = (0x45, 0x28, proto);
                    h[12..24].copy_from_slice(&[192, 0, 2, 1, 198, 18, 0, 1, 0x04, 0xd2, 0x00, 0x35]);
                    h[33] = 0x12;
                }
                let key = |h: &[u8]| if v6 { key_v6(h) } else { key_v4(h) };
                let want = key(&h);
                for (at, r) in read.iter_mut().enumerate() {
                    for bit in 0..8 {
                        let mut o = h.clone();
                        o[at] ^= 1 << bit;
                        if key(&o) != want {
                            *r |= 1 << bit;
                        }
                    }
                }
            }
            let listed: &[u8] = if v6 { &KEY_BITS_V6 } else { &key::KEY_BITS_V4 };
            assert_eq!(read, listed, "v6 {v6}");
        }
    }

    /// Every cached verdict sees every key field, checked against the
    /// one list of them ([`PacketKey::FIELDS`]): for IPv4 (the ACL node's
    /// runs, [`FlowSig::follow`], and the shortcuts' [`Pattern`]) and IPv6
    /// (`Pattern6`), input and output, TCP, UDP and ICMP, every bit of the
    /// L3 bytes the key may read and every metadata field a key takes is
    /// flipped; whenever the reference key (`key_v4`/`key_v6` with the
    /// interfaces and VLAN) changes, no cache takes the packet. Every field
    /// of the list but the family (`is_v6`, which the node's family fixes)
    /// must have changed in some flip: a new key field fails here until
    /// the flows reach it and every cache sees it.
    #[test]
    fn cached_verdicts_see_every_key_field() {
        use crate::shortcut::Pattern6;
        let mut pool = PacketPool::new(PoolConfig { frames: 64, ..PoolConfig::default() }).expect("pool");
        let mut reached = std::collections::BTreeSet::new();
        for (v6, proto) in [(false, 6u8), (false, 17), (false, 1), (true, 6), (true, 17), (true, 58)] {
            for out in [false, true] {
                // 14 bytes of Ethernet, then L3 and transport bytes.
                let mut f = [0u8; 14 + 60];
                let l3 = &mut f[14..];
                if v6 {
                    l3[0] = 0x60;
                    l3[4..6].copy_from_slice(&20u16.to_be_bytes());
                    l3[6] = proto;
                    (l3[8], l3[23], l3[24], l3[39]) = (0x20, 2, 0x20, 1);
                    l3[40..44].copy_from_slice(&[0x04, 0xd2, 0x00, 0x35]);
                    l3[53] = 0x12;
                } else {
                    l3[0] = 0x45;
                    l3[1] = 0x28;
                    l3[2..4].copy_from_slice(&60u16.to_be_bytes());
                    l3[9] = proto;
                    l3[12..24].copy_from_slice(&[192, 0, 2, 1, 198, 18, 0, 1, 0x04, 0xd2, 0x00, 0x35]);
                    l3[33] = 0x12;
                }
                let m = Meta { len: f.len() as u16, rx_if: 1, tx_if: 2, l3_off: 14, vlan: 3, ..Meta::default() };
                let reference = |m: &Meta, f: &[u8]| {
                    let l3 = &f[usize::from(m.l3_off)..];
                    let mut k = if v6 { key_v6(l3) } else { key_v4(l3) };
                    (k.in_if, k.out_if, k.vlan) = (m.rx_if, if out { m.tx_if } else { 0 }, m.vlan);
                    k
                };
                let want = reference(&m, &f);
                // What each cache holds for the flow.
                let head = pool.alloc_from(&f).expect("buffer");
                *pool.meta_mut(head) = Meta { off: pool.meta(head).off, ..m };
                let sig = FlowSig::of(&pool, head, pool.meta(head), out);
                assert_eq!(sig.valid(), !v6);
                if !v6 {
                    assert_eq!(sig.key(), want, "proto {proto} out {out}");
                }
                let p4 = Pattern::of(&m, &f[14..]);
                let p6 = Pattern6::of(&m, &f[14..]);
                assert_eq!((p4.is_some(), p6.is_some()), (!v6, v6));
                // Whether a cache takes packet (`m`, `f`): the shortcut's
                // pattern (at any length; an output entry only on its
                // transmitting interface, `OutputAcl::applies`), or
                // for IPv4 a run that the packet joins.
                let mut takes = |m: &Meta, f: &[u8]| -> Vec<&str> {
                    let l3 = &f[14..];
                    let meta = meta16(m);
                    let mut who = Vec::new();
                    fn pattern<P: FlowPattern>(p: &P, meta: Bytes16, l3: &[u8]) -> bool {
                        P::head(l3).is_some_and(|(h, tcp)| {
                            let bits = p.compare(meta, h);
                            p.tcp_agrees(tcp) && (bits == SAME || p.other_len(bits, meta, h))
                        })
                    }
                    let applies = !out || m.tx_if == 2;
                    if applies && p4.as_ref().is_some_and(|(p, _)| pattern(p, meta, l3)) {
                        who.push("Pattern");
                    }
                    if applies && p6.as_ref().is_some_and(|(p, _)| pattern(p, meta, l3)) {
                        who.push("Pattern6");
                    }
                    if !v6 {
                        let q = pool.alloc_from(f).expect("buffer");
                        *pool.meta_mut(q) = Meta { off: pool.meta(q).off, ..*m };
                        let mh = pool.meta(head);
                        let joined = if out {
                            sig.follow::<true>(&pool, mh, &[q])
                        } else {
                            sig.follow::<false>(&pool, mh, &[q])
                        };
                        pool.free(q);
                        if joined.0 == 1 {
                            who.push("FlowSig::follow");
                        }
                    }
                    who
                };
                assert_eq!(takes(&m, &f).len(), if v6 { 1 } else { 2 }, "proto {proto} out {out}: the flow itself");
                let mut variants: Vec<(String, Meta, [u8; 74])> = Vec::new();
                for at in 14..14 + if v6 { 54 } else { 34 } {
                    for bit in 0..8 {
                        let mut o = f;
                        o[at] ^= 1 << bit;
                        variants.push((format!("L3 byte {} bit {bit}", at - 14), m, o));
                    }
                }
                for (what, o) in [
                    ("rx_if", Meta { rx_if: 5, ..m }),
                    ("tx_if", Meta { tx_if: 11, ..m }),
                    ("vlan", Meta { vlan: 7, ..m }),
                ] {
                    variants.push((what.to_string(), o, f));
                }
                for (what, vm, vf) in variants {
                    let changed = want.differing_fields(&reference(&vm, &vf));
                    if changed.is_empty() {
                        continue;
                    }
                    reached.extend(changed.iter().copied());
                    let who = takes(&vm, &vf);
                    assert!(
                        who.is_empty(),
                        "v6 {v6} proto {proto} out {out} {what} changes {changed:?}: {who:?} took it"
                    );
                }
                pool.free(head);
            }
        }
        let all: std::collections::BTreeSet<&str> =
            PacketKey::FIELDS.iter().copied().filter(|&f| f != "is_v6").collect();
        assert_eq!(reached, all, "key fields the flips reached");
    }

    /// A run followed in place counts every packet's own length, in
    /// pairs and one at a time, through changes of length, and ends at
    /// a packet too short for a signature or at another flow.
    #[test]
    fn follow_counts_lengths() {
        let mut pool = PacketPool::new(PoolConfig { frames: 64, ..PoolConfig::default() }).expect("pool");
        let mut h = [0u8; 14 + 60];
        h[14] = 0x45;
        h[14 + 9] = 17;
        h[14 + 12..14 + 24].copy_from_slice(&[192, 0, 2, 1, 198, 18, 0, 1, 0x04, 0xd2, 0x00, 0x35]);
        let alloc = |pool: &mut PacketPool, len: usize, dst: u8| {
            let mut h = h;
            h[14 + 19] = dst;
            let p = pool.alloc_from(&h[..len]).expect("buffer");
            let m = pool.meta_mut(p);
            (m.l3_off, m.rx_if) = (14, 1);
            p
        };
        let head = alloc(&mut pool, 60, 1);
        let sig = FlowSig::of(&pool, head, pool.meta(head), false);
        for (lens, joined) in [
            (&[60usize, 60, 60, 60, 60][..], 5),
            (&[60, 70, 70, 60, 74, 47, 60][..], 5),
            (&[70, 60, 60, 60, 47, 60][..], 4),
            (&[60, 60, 61, 0][..], 3),
            (&[0, 60][..], 0),
            (&[60][..], 1),
            (&[][..], 0),
        ] {
            // Length 0: another flow.
            let pkts: Vec<PktIdx> =
                lens.iter().map(|&l| if l == 0 { alloc(&mut pool, 60, 2) } else { alloc(&mut pool, l, 1) }).collect();
            let want: u64 = lens.iter().take(joined).map(|&l| l as u64).sum();
            assert_eq!(sig.follow::<false>(&pool, pool.meta(head), &pkts), (joined, want), "lengths {lens:?}");
            for p in pkts {
                pool.free(p);
            }
        }
    }

    /// The signature's key is [`key_v4`]'s, for headers of every protocol,
    /// fragment state, DSCP and interface.
    #[test]
    fn signature_key_is_the_header_key() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let protos = [1u8, 6, 17, 33, 47, 58, 132, 136, 255];
        for _ in 0..20_000 {
            let mut h = [0u8; 40];
            for b in h.iter_mut() {
                *b = rnd() as u8;
            }
            h[0] = 0x45;
            h[9] = protos[rnd() as usize % protos.len()];
            if rnd() % 2 == 0 {
                h[6] &= 0xe0;
                h[7] = 0;
            }
            let len = 34 + rnd() as usize % 7;
            let (rx_if, out_if, vlan) = (rnd() as u16, rnd() as u16, rnd() as u16 & 0x0fff);
            let sig = FlowSig::v4(&h[..len], rx_if, out_if, vlan);
            assert!(sig.valid());
            let mut want = key_v4(&h[..len]);
            want.in_if = rx_if;
            want.out_if = out_if;
            want.vlan = vlan;
            assert_eq!(sig.key(), want, "header {h:02x?}");
            let mut other = h;
            other[8] ^= 0xff; // TTL
            other[10] ^= 0x55; // checksum
            other[2] ^= 0x01; // total length
            assert!(FlowSig::v4(&other[..len], rx_if, out_if, vlan).same_flow(&sig));
        }
        assert!(!FlowSig::v4(&[0x46; 40], 0, 0, 0).valid());
        assert!(!FlowSig::v4(&[0x45; 33], 0, 0, 0).valid());
        assert!(!FlowSig::NONE.same_flow(&FlowSig::NONE));
    }
}
