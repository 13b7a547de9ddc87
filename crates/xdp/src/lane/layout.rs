//! The lane's map value layouts, encoded byte for byte as `bpf/lane.h`
//! declares them (the C side asserts the same sizes with
//! `_Static_assert`). Values are built in native byte order, as the
//! program reads them; addresses and GRE keys are stored as the C comments
//! say.

use std::net::IpAddr;

/// Capacities, as `bpf/lane.h` defines them.
pub const MAX_PORTS: u16 = 32;
pub const MAX_QUEUES: u32 = 64;
pub const MAX_IFS: u16 = 4096;
pub const MAX_SETS: usize = 64;
pub const ACL_RULES: usize = 64;
pub const ACL_INTERVALS: usize = 128;
pub const NF: usize = 11;
pub const BLOCK: usize = 256;
/// Default buckets of the ACL verdict cache (per CPU, 2 entries each).
pub const ACL_CACHE_BUCKETS: u32 = 1024;
/// Default buckets of the forwarding memo's flow table (per CPU, 2 flows each).
pub const FWD_BUCKETS: u32 = 2048;
#[cfg(test)]
pub const MAX_TUNNELS: u32 = 1024;
pub const NO_SET: u16 = 0xffff;
pub const NO_IF: u16 = 0xffff;

pub(crate) const LCFG_NEIGH_TO_TERN: u32 = 1 << 0;
pub(crate) const LCFG_PASS_ALL: u32 = 1 << 1;
pub(crate) const LCFG_LINUX_MODE: u32 = 1 << 2;
pub(crate) const LCFG_LOCAL4: u32 = 1 << 3;
pub(crate) const LCFG_LOCAL6: u32 = 1 << 4;
pub(crate) const LCFG_TRACE: u32 = 1 << 5;

const LIF_EXISTS: u8 = 1 << 0;
const LIF_UP: u8 = 1 << 1;
const LIF_TX: u8 = 1 << 2;
const LIF_CAPTURE: u8 = 1 << 3;

pub(crate) const LACL_OK: u32 = 1 << 0;

pub(crate) const IF_SIZE: usize = 76;
pub(crate) const TUN_KEY_SIZE: usize = 40;
pub(crate) const ACL_SET_SIZE: usize = 64;
/// First-level starts of a field table (`LANE_ACL_TOP`).
pub(crate) const ACL_TOP: usize = ACL_INTERVALS / 8;
/// The low word of a start beyond a table's intervals (`LANE_ACL_PAD`).
pub(crate) const ACL_PAD: u64 = 1 << 62;
pub(crate) const ACL_FIELD_SIZE: usize = 8 + 8 * ACL_TOP + 3 * 8 * ACL_INTERVALS;
pub(crate) const ACL_CBUCKET_SIZE: usize = 128;
/// One verdict cache entry (`struct lane_acl_centry`), also the memo's value.
pub(crate) const ACL_CENTRY_SIZE: usize = 64;
/// One flow of the forwarding memo (`struct lane_fwd_flow`) ...
pub(crate) const FWD_FLOW_SIZE: usize = 128;
/// ... and one bucket of them, the map's value (`struct lane_fwd_fbucket`).
pub(crate) const FWD_FBUCKET_SIZE: usize = 256;
/// `struct lane_cfg` (8 bytes in builds before the forwarding memo, which
/// had no `fib_gen`).
pub(crate) const CFG_SIZE: usize = 16;

/// Where the verdict cache packs each non-address field (`LANE_CK_*` in
/// `bpf/lane.h`): field index, bit position in the two packed words, width.
pub(crate) const CKEY_FIELDS: [(usize, &str, u32, u32); 9] = [
    (3, "SPORT", 0, 17),
    (4, "DPORT", 17, 17),
    (5, "ICMP", 34, 17),
    (6, "TCP", 51, 9),
    (2, "PROTO", 64, 8),
    (7, "IIF", 72, 16),
    (8, "OIF", 88, 16),
    (9, "VLAN", 104, 12),
    (10, "DSCP", 116, 6),
];

/// The packed key words' bits of the fields in `fields` (bit f: field f).
pub(crate) fn ckey_masks(fields: u32) -> [u64; 2] {
    let mut m = [0u64; 2];
    for &(f, _, at, bits) in &CKEY_FIELDS {
        if fields & (1 << f) != 0 {
            m[at as usize / 64] |= ((1u64 << bits) - 1) << (at % 64);
        }
    }
    m
}

/// What kind of interface, as the lane sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneIfKind {
    Port,
    /// An 802.1Q sub-interface with this VLAN id.
    Vlan(u16),
    Gre(LaneGre),
}

/// A GRE tunnel's encapsulation (RFC 2784, key per RFC 2890).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneGre {
    pub local: IpAddr,
    pub remote: IpAddr,
    pub key: Option<u32>,
    pub ttl: u8,
}

/// One tern interface in the lane's interface table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneIf {
    /// tern interface index (the table's key).
    pub index: u16,
    pub kind: LaneIfKind,
    pub up: bool,
    /// The carrier port (devmap key); [`NO_IF`] for tunnels.
    pub port: u16,
    /// The carrier port is attached to the lane (frames can leave by it).
    pub tx: bool,
    pub mac: [u8; 6],
    /// IP MTU.
    pub mtu: u16,
    /// Rule set indices (positions in the rule-set list).
    pub acl_in: Option<u16>,
    pub acl_out: Option<u16>,
    /// The link-local address (fe80::/64 + EUI-64).
    pub v6_ll: [u8; 16],
    /// A port `tern capture` watches: the lane hands every frame it
    /// receives there to the engine (`xdp-lane/punt-capture`).
    pub capture: bool,
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    if let Some(s) = b.get_mut(at..at + 2) {
        s.copy_from_slice(&v.to_ne_bytes());
    }
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = b.get_mut(at..at + 4) {
        s.copy_from_slice(&v.to_ne_bytes());
    }
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    if let Some(s) = b.get_mut(at..at + 8) {
        s.copy_from_slice(&v.to_ne_bytes());
    }
}

fn put_bytes(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(s) = b.get_mut(at..at + v.len()) {
        s.copy_from_slice(v);
    }
}

/// An address as the lane stores it: 16 bytes, IPv4 in the first 4.
pub(crate) fn addr16(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(a) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&a.octets());
            b
        }
        IpAddr::V6(a) => a.octets(),
    }
}

impl LaneIf {
    /// `struct lane_if`.
    pub(crate) fn encode(&self) -> [u8; IF_SIZE] {
        let mut b = [0u8; IF_SIZE];
        let mut flags = LIF_EXISTS;
        if self.up {
            flags |= LIF_UP;
        }
        if self.tx {
            flags |= LIF_TX;
        }
        if self.capture {
            flags |= LIF_CAPTURE;
        }
        b[0] = flags;
        let (kind, vid) = match self.kind {
            LaneIfKind::Port => (0u8, 0u16),
            LaneIfKind::Vlan(v) => (1, v),
            LaneIfKind::Gre(_) => (2, 0),
        };
        b[1] = kind;
        put16(&mut b, 2, self.port);
        put16(&mut b, 4, vid);
        put16(&mut b, 6, self.mtu);
        put_bytes(&mut b, 8, &self.mac);
        put16(&mut b, 14, self.acl_in.unwrap_or(NO_SET));
        put16(&mut b, 16, self.acl_out.unwrap_or(NO_SET));
        put_bytes(&mut b, 20, &self.v6_ll);
        if let LaneIfKind::Gre(g) = self.kind {
            b[36] = u8::from(g.remote.is_ipv6());
            b[37] = u8::from(g.key.is_some());
            b[38] = g.ttl;
            put32(&mut b, 40, g.key.unwrap_or(0));
            put_bytes(&mut b, 44, &addr16(g.local));
            put_bytes(&mut b, 60, &addr16(g.remote));
        }
        b
    }
}

/// `struct lane_cfg`: the publication sequence, the flags, the FIB
/// sequence.
pub(crate) fn encode_cfg(gen_: u32, flags: u32, fib_gen: u32) -> [u8; CFG_SIZE] {
    let mut b = [0u8; CFG_SIZE];
    put32(&mut b, 0, gen_);
    put32(&mut b, 4, flags);
    put32(&mut b, 8, fib_gen);
    b
}

/// `struct lane_rx`.
pub(crate) fn encode_rx(kifindex: u32, ifindex: u16, port: u16) -> [u8; 8] {
    let mut b = [0u8; 8];
    put32(&mut b, 0, kifindex);
    put16(&mut b, 4, ifindex);
    put16(&mut b, 6, port);
    b
}

/// `struct lane_tun_key`: GRE packets from `remote` to `local` with `key`
/// belong to the tunnel stored under it.
pub(crate) fn encode_tun_key(gen_: u32, g: &LaneGre) -> [u8; TUN_KEY_SIZE] {
    let mut b = [0u8; TUN_KEY_SIZE];
    b[0] = gen_ as u8;
    b[1] = u8::from(g.remote.is_ipv6());
    b[2] = u8::from(g.key.is_some());
    // The program reads the key from the packet in host order.
    put32(&mut b, 4, g.key.unwrap_or(0));
    put_bytes(&mut b, 8, &addr16(g.local));
    put_bytes(&mut b, 24, &addr16(g.remote));
    b
}

/// `struct lane_acl_set` for one family of one rule set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AclSetHdr {
    pub ok: bool,
    pub fields: u32,
    pub all: u64,
    pub terminal: u64,
    pub drop: u64,
    pub count: u64,
    pub default_drop: bool,
    pub nrules: u32,
}

impl AclSetHdr {
    pub(crate) fn encode(&self) -> [u8; ACL_SET_SIZE] {
        let mut b = [0u8; ACL_SET_SIZE];
        put32(&mut b, 0, if self.ok { LACL_OK } else { 0 });
        put32(&mut b, 4, self.fields);
        put64(&mut b, 8, self.all);
        put64(&mut b, 16, self.terminal);
        put64(&mut b, 24, self.drop);
        put64(&mut b, 32, self.count);
        put32(&mut b, 40, u32::from(self.default_drop));
        put32(&mut b, 44, self.nrules);
        let [m0, m1] = ckey_masks(self.fields);
        put64(&mut b, 48, m0);
        put64(&mut b, 56, m1);
        b
    }
}

/// `struct lane_acl_field`: interval starts (as 128-bit values), the rule
/// bits of each interval, and every 8th low word repeated in `top` (the
/// first level of the program's two-level search, `acl_field32`). The
/// starts beyond `n` are (2^64 - 1, [`ACL_PAD`]) with the last interval's
/// bits: above every 32-bit value (`acl_field32`), and above every 128-bit
/// value but those the last interval holds anyway (`acl_field`'s 4-ary
/// search reads them without looking at `n`).
pub(crate) fn encode_acl_field(starts: &[u128], bits: &[u64]) -> [u8; ACL_FIELD_SIZE] {
    let mut b = [0u8; ACL_FIELD_SIZE];
    let n = starts.len().min(bits.len()).min(ACL_INTERVALS);
    put32(&mut b, 0, n as u32);
    let lo_at = 8 + 8 * ACL_TOP;
    let hi_at = lo_at + 8 * ACL_INTERVALS;
    let bits_at = hi_at + 8 * ACL_INTERVALS;
    let lo = |i: usize| if i < n { starts[i] as u64 } else { ACL_PAD };
    for j in 1..ACL_TOP {
        put64(&mut b, 8 + 8 * j, lo(8 * j));
    }
    for i in 0..ACL_INTERVALS {
        put64(&mut b, lo_at + 8 * i, lo(i));
    }
    for (i, (s, m)) in starts.iter().zip(bits).take(n).enumerate() {
        put64(&mut b, hi_at + 8 * i, (*s >> 64) as u64);
        put64(&mut b, bits_at + 8 * i, *m);
    }
    let last = if n > 0 { bits[n - 1] } else { 0 };
    for i in n..ACL_INTERVALS {
        put64(&mut b, hi_at + 8 * i, u64::MAX);
        put64(&mut b, bits_at + 8 * i, last);
    }
    b
}

/// Keys of the per-family tables of rule set `set` in half `gen_`.
pub(crate) fn acl_base(gen_: u32, set: usize, v6: bool) -> u32 {
    ((gen_ as usize * MAX_SETS + set) * 2 + usize::from(v6)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes `bpf/lane.h` asserts, read from the header itself.
    #[test]
    fn sizes_match_the_c_header() {
        let h = include_str!("../../bpf/lane.h");
        for (what, size) in [
            ("sizeof(struct lane_if) == ", IF_SIZE),
            ("sizeof(struct lane_tun_key) == ", TUN_KEY_SIZE),
            ("sizeof(struct lane_acl_set) == ", ACL_SET_SIZE),
            ("sizeof(struct lane_acl_cbucket) == ", ACL_CBUCKET_SIZE),
            ("sizeof(struct lane_acl_centry) == ", ACL_CENTRY_SIZE),
            ("sizeof(struct lane_fwd_l2) == ", 16),
            ("sizeof(struct lane_fwd_flow) == ", FWD_FLOW_SIZE),
            ("sizeof(struct lane_fwd_fbucket) == ", FWD_FBUCKET_SIZE),
            ("sizeof(struct lane_cfg) == ", CFG_SIZE),
        ] {
            let at = h.find(what).unwrap_or_else(|| panic!("{what} not asserted in lane.h"));
            let n: usize =
                h[at + what.len()..].split(',').next().and_then(|s| s.trim().parse().ok()).expect("a number");
            assert_eq!(n, size, "{what}");
        }
        for (name, v) in [
            ("LANE_MAX_PORTS", u64::from(MAX_PORTS)),
            ("LANE_MAX_QUEUES", u64::from(MAX_QUEUES)),
            ("LANE_MAX_IFS", u64::from(MAX_IFS)),
            ("LANE_MAX_SETS", MAX_SETS as u64),
            ("LANE_ACL_RULES", ACL_RULES as u64),
            ("LANE_ACL_INTERVALS", ACL_INTERVALS as u64),
            ("LANE_NF", NF as u64),
            ("LANE_BLOCK", BLOCK as u64),
            ("LANE_MAX_TUNNELS", u64::from(MAX_TUNNELS)),
            ("LANE_ACL_CACHE_BUCKETS", u64::from(ACL_CACHE_BUCKETS)),
            ("LANE_FWD_BUCKETS", u64::from(FWD_BUCKETS)),
        ] {
            assert_eq!(define(h, name), v, "{name}");
        }
        for &(_, name, at, bits) in &CKEY_FIELDS {
            assert_eq!(define(h, &format!("LANE_CK_{name}_AT")), u64::from(at), "{name}");
            assert_eq!(define(h, &format!("LANE_CK_{name}_BITS")), u64::from(bits), "{name}");
        }
    }

    fn define(h: &str, name: &str) -> u64 {
        let pat = format!("#define {name} ");
        let at = h.find(&pat).unwrap_or_else(|| panic!("{name} missing"));
        h[at + pat.len()..].split_whitespace().next().and_then(|s| s.parse().ok()).expect("a number")
    }

    /// The packed fields do not overlap, stay within their words, and
    /// name every field but the addresses once.
    #[test]
    fn packed_cache_key_fields_are_disjoint() {
        let all = ckey_masks(u32::MAX);
        let total: u32 = CKEY_FIELDS.iter().map(|f| f.3).sum();
        assert_eq!(all[0].count_ones() + all[1].count_ones(), total, "overlap");
        for &(_, name, at, bits) in &CKEY_FIELDS {
            assert!(at % 64 + bits <= 64, "{name} crosses a word");
        }
        let mut fs: Vec<usize> = CKEY_FIELDS.iter().map(|f| f.0).collect();
        fs.sort_unstable();
        assert_eq!(fs, (2..NF).collect::<Vec<_>>());
        assert_eq!(ckey_masks(0b11), [0, 0], "addresses are not packed");
    }

    /// A small deterministic generator (xorshift64) for the search tests.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// The program's two-level search (`acl_field32`), run on the encoded
    /// bytes: for random interval tables and values it finds the interval
    /// the reference lookup finds.
    #[test]
    fn two_level_search_finds_the_interval_of_the_reference() {
        let word = |b: &[u8], at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let search = |b: &[u8], v: u32| -> u64 {
            let v = u64::from(v);
            let lo_at = 8 + 8 * ACL_TOP;
            let above: u64 = (1..ACL_TOP).map(|j| v.wrapping_sub(word(b, 8 + 8 * j)) >> 63).sum();
            let at = ((ACL_TOP as u64 - 1 - above) & (ACL_TOP as u64 - 1)) as usize * 8;
            let above: u64 = (1..8).map(|i| v.wrapping_sub(word(b, lo_at + 8 * (at + i))) >> 63).sum();
            let at = (at + 7 - above as usize) & (ACL_INTERVALS - 1);
            word(b, lo_at + 16 * ACL_INTERVALS + 8 * at)
        };
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        for round in 0..400 {
            let n = 1 + (next() as usize % ACL_INTERVALS);
            let span = if round % 2 == 0 { u64::from(u32::MAX) } else { 300 };
            let mut starts: Vec<u128> = (1..n).map(|_| u128::from(next() % span)).collect();
            starts.push(0);
            starts.sort_unstable();
            starts.dedup();
            let bits: Vec<u64> = (0..starts.len()).map(|_| next()).collect();
            let t = super::super::acl::FieldTable { field: 2, starts: starts.clone(), bits: bits.clone() };
            let b = encode_acl_field(&starts, &bits);
            let mut probes: Vec<u32> = (0..64).map(|_| (next() % span) as u32).collect();
            for &s in &starts {
                let s = s as u32;
                probes.extend([s, s.saturating_sub(1), s.saturating_add(1)]);
            }
            probes.push(u32::MAX);
            for v in probes {
                assert_eq!(search(&b, v), t.lookup(u128::from(v)), "n {} value {v}", starts.len());
            }
        }
    }

    /// The program's 4-ary search over 128-bit starts (`acl_field`), run
    /// on the encoded bytes: for random interval tables (full, short and
    /// empty) and values (the starts, their neighbours, the extremes,
    /// random ones) it finds the interval the reference lookup finds.
    #[test]
    fn four_ary_search_finds_the_interval_of_the_reference() {
        let word = |b: &[u8], at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let lo_at = 8 + 8 * ACL_TOP;
        let hi_at = lo_at + 8 * ACL_INTERVALS;
        let bits_at = hi_at + 8 * ACL_INTERVALS;
        let search = |b: &[u8], v: u128| -> u64 {
            // As lib/acl.h acl_le128 computes start <= value, in 64-bit words.
            let le = |p: usize| {
                let p = p & (ACL_INTERVALS - 1);
                let (shi, slo) = (word(b, hi_at + 8 * p), word(b, lo_at + 8 * p));
                let (hi, lo) = ((v >> 64) as u64, v as u64);
                let d = (lo >> 1).wrapping_sub(slo >> 1) as i64 + ((lo & 1).wrapping_sub(slo & 1) as i64 >> 1);
                let borrow = (d as u64) >> 63;
                let d = (hi >> 1).wrapping_sub(shi >> 1) as i64
                    + ((hi & 1).wrapping_sub(shi & 1).wrapping_sub(borrow) as i64 >> 1);
                let le = 1 - ((d as u64) >> 63) as usize;
                assert_eq!(le == 1, ((u128::from(shi) << 64) | u128::from(slo)) <= v, "compare");
                le
            };
            let mut at = 32 * (le(32) + le(64) + le(96));
            at += 8 * (le(at + 8) + le(at + 16) + le(at + 24));
            at += 2 * (le(at + 2) + le(at + 4) + le(at + 6));
            at += le(at + 1);
            word(b, bits_at + 8 * (at & (ACL_INTERVALS - 1)))
        };
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        for round in 0..400 {
            let n = match round % 4 {
                0 => ACL_INTERVALS,
                1 => 1,
                _ => 1 + (next() as usize % ACL_INTERVALS),
            };
            // Full-width starts, or starts that differ only in their low
            // word (one IPv6 /64), or only in their high word.
            let mut starts: Vec<u128> = (1..n)
                .map(|_| {
                    let (h, l) = (u128::from(next()), u128::from(next()));
                    match round % 3 {
                        0 => (h << 64) | l,
                        1 => (0x2001_0db8_0000_0001u128 << 64) | l,
                        _ => h << 64,
                    }
                })
                .collect();
            starts.push(0);
            starts.sort_unstable();
            starts.dedup();
            let bits: Vec<u64> = (0..starts.len()).map(|_| next() | 1).collect();
            let t = super::super::acl::FieldTable { field: 0, starts: starts.clone(), bits: bits.clone() };
            let b = encode_acl_field(&starts, &bits);
            let mut probes: Vec<u128> = (0..64).map(|_| (u128::from(next()) << 64) | u128::from(next())).collect();
            for &s in &starts {
                probes.extend([s, s.saturating_sub(1), s.saturating_add(1)]);
            }
            probes.extend([0, u128::MAX, u128::MAX - 1, (u128::from(u64::MAX) << 64) | u128::from(ACL_PAD)]);
            for v in probes {
                assert_eq!(search(&b, v), t.lookup(v), "n {} value {v:#x}", starts.len());
            }
        }
        // An empty table matches nothing.
        let b = encode_acl_field(&[], &[]);
        assert_eq!(search(&b, 0), 0);
        assert_eq!(search(&b, u128::MAX), 0);
    }

    #[test]
    fn interface_encoding_puts_fields_where_c_reads_them() {
        let f = LaneIf {
            index: 3,
            kind: LaneIfKind::Gre(LaneGre {
                local: "10.0.0.1".parse().expect("a"),
                remote: "10.0.0.2".parse().expect("a"),
                key: Some(0x0102_0304),
                ttl: 64,
            }),
            up: true,
            port: NO_IF,
            tx: false,
            mac: [2, 0, 0, 0, 0, 9],
            mtu: 1476,
            acl_in: Some(5),
            acl_out: None,
            v6_ll: [0xfe; 16],
            capture: false,
        };
        let b = f.encode();
        assert_eq!(b[0], LIF_EXISTS | LIF_UP);
        assert_eq!(b[1], 2);
        assert_eq!(u16::from_ne_bytes([b[6], b[7]]), 1476);
        assert_eq!(&b[8..14], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(u16::from_ne_bytes([b[14], b[15]]), 5);
        assert_eq!(u16::from_ne_bytes([b[16], b[17]]), NO_SET);
        assert_eq!((b[36], b[37], b[38]), (0, 1, 64));
        assert_eq!(u32::from_ne_bytes([b[40], b[41], b[42], b[43]]), 0x0102_0304);
        assert_eq!(&b[44..48], &[10, 0, 0, 1]);
        assert_eq!(&b[60..64], &[10, 0, 0, 2]);
    }
}
