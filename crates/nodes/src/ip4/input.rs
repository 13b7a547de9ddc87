//! `ip4-input`: validates an IPv4 header (RFC 1812 5.2.2: version, header
//! length, total length against the frame, checksum) and drops martian
//! sources; trims Ethernet padding. Multicast and limited broadcast are
//! not routed: dropped, or with the TAP exception path of Linux mode
//! (`Params::punt_to_tap`) handed to Linux (OSPF hellos, DHCP), through
//! `ip4-punt-acl` when the receiving interface has an input rule set.
//!
//! Next nodes: `ip4-lookup`, `ip4-acl-in` (when the receiving interface has
//! an input rule set, unless the packet's flow is one the rule set accepted:
//! `crate::shortcut`), `linux-punt`, `ip4-punt-acl`, `drop`. Counters:
//! [`Ip4InputError::DESCS`].
//!
//! Config: the interfaces' input rule sets (`IfTable`, `acl_in`) and
//! `Params::punt_to_tap`.
//!
//! Example: a frame with a valid 20-byte header for 10.0.2.2 leaves for
//! `ip4-lookup` with `L3_CSUM_OK` set and its Ethernet padding trimmed; the
//! same header with TTL and checksum out of step is dropped as
//! `bad-checksum`.
//!
//! Reference: `ip4_validate_general` checks one packet at a time (the
//! loop is `for p in batch { next = ip4_validate_general(p) }`); the fast
//! path, `ip4_validate`, takes the common 20-byte header in one test and
//! gives the same verdicts (`direct_tests`), and with input rule sets the
//! flow the rule set last accepted skips `ip4-acl-in` (`crate::shortcut`).

use super::*;

/// The `ip4-input` node (see the module).
pub struct Ip4Input {
    ifs: Snapshot<IfTable>,
    params: Snapshot<crate::state::Params>,
    /// By interface index, whether it has an input rule set; empty when
    /// none has, and the loop then skips the question. Worked out again
    /// only when a new table is published.
    acl_in: Vec<bool>,
    /// The flow the input rule set last accepted.
    shortcut: AclShortcut<Pattern>,
}

impl Ip4Input {
    pub fn new(shared: &crate::state::Shared) -> Self {
        let ifs = shared.ifaces.snapshot();
        let acl_in = acl_in_by_index(ifs.current());
        Ip4Input { ifs, params: shared.params.snapshot(), acl_in, shortcut: AclShortcut::new(shared.acls.snapshot()) }
    }
}

/// [`Ip4Input::acl_in`] for a table (by position, as `IfTable::get`).
pub(crate) fn acl_in_by_index(ifs: &IfTable) -> Vec<bool> {
    if !ifs.any_acl_in() {
        return Vec::new();
    }
    ifs.ifs.iter().map(|f| f.acl_in.is_some()).collect()
}

tern_engine::edges! {
    /// `ip4-input`'s next nodes.
    pub enum Ip4InputNext {
        Drop = "drop",
        Lookup = "ip4-lookup",
        /// The receiving interface has an input rule set.
        AclIn = "ip4-acl-in",
        /// Multicast or broadcast for Linux (TAP exception path).
        Punt = "linux-punt",
        /// The same, through the input rule set.
        PuntAcl = "ip4-punt-acl",
        /// VRRP advertisements (224.0.0.18, protocol 112) for tern's own
        /// VRRP, which `ip4-local` hands to the control thread.
        Local = "ip4-local",
    }
}

tern_engine::errors! {
    /// `ip4-input`'s counters.
    pub enum Ip4InputError {
        TooShort = drop("too-short", "shorter than an IPv4 header"),
        BadVersion = drop("bad-version", "IP version is not 4"),
        BadHdrLen = drop("bad-header-length", "IHL below 5 or beyond the frame"),
        BadLen = drop("bad-length", "total length smaller than the header"),
        Truncated = drop("truncated", "total length beyond the frame"),
        BadCsum = drop("bad-checksum", "header checksum does not verify"),
        MartianSrc = drop("martian-source", "source is multicast, broadcast, loopback or 0/8"),
        Multicast = drop("multicast", "multicast destination (no multicast routing)"),
        Broadcast = drop("broadcast", "limited broadcast destination"),
        AclShortcut = info("acl-shortcut", "accepted by the input rule set without ip4-acl-in: a flow it accepted before"),
        MartianDst = drop("martian-destination", "destination in 0/8, 127/8 or 240/4 (RFC 1812 5.3.7)"),
        L2Multi = drop("l2-multicast", "unicast destination in a link-layer broadcast or multicast (RFC 1812 5.3.4)"),
    }
}

impl Node for Ip4Input {
    fn name(&self) -> &'static str {
        "ip4-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip4InputNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip4InputError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        if self.ifs.refresh() {
            self.acl_in = acl_in_by_index(self.ifs.current());
        }
        self.params.refresh();
        let params = self.params.current();
        let (punt, fast) = (params.punt_to_tap(), params.fast_paths);
        // Two loops, so that the one without input rule sets carries no
        // trace of the question. The shortcut is the direct path's:
        // without it, every packet with an input rule set goes to
        // `ip4-acl-in`.
        if self.acl_in.is_empty() {
            validate_batch(cx, pkts, next, punt, fast.direct);
        } else {
            let v = Validate4 { punt, direct: fast.direct };
            let tables = (&self.acl_in[..], self.ifs.current(), self.ifs.generation());
            let on = (fast.direct && fast.acl_shortcut, Ip4InputError::AclShortcut as u16);
            self.shortcut.input_batch(cx, (pkts, next), &v, tables, on);
        }
        if fast.direct && cx.tracing() {
            self.trace_fast(cx, pkts, next);
        }
    }
}

impl Ip4Input {
    /// Notes on the traced packets of a batch what the fast path did: the
    /// usual header in one test, and the input rule set's verdict cache
    /// (a packet with an input rule set that left for the lookup).
    #[cold]
    #[inline(never)]
    fn trace_fast(&self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &[u16]) {
        for (&p, &n) in pkts.iter().zip(next) {
            let (m, d) = cx.pool.pkt(p);
            if m.flags & flags::TRACED == 0 || n != Ip4InputNext::Lookup as u16 {
                continue;
            }
            let plain = d.get(usize::from(m.l3_off)).is_some_and(|&b| b == 0x45) && m.flags & flags::L2_MULTI == 0;
            if !plain {
                continue;
            }
            let cached = self.acl_in.get(usize::from(m.rx_if)).copied().unwrap_or(false);
            cx.trace_note(p, || "direct path".into());
            if cached {
                let note = self.shortcut.note();
                cx.trace_note(p, || note);
            }
        }
    }
}

/// The reference: one packet's IPv4 header, any header (options, other
/// versions, headers cut short), one check at a time. [`ip4_validate`]
/// takes the usual header faster with the same verdicts.
#[cold]
#[inline(never)]
fn ip4_validate_general(cx: &mut Cx<'_>, p: PktIdx, punt: bool) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    let l3off = m.l3_off as usize;
    let Some(l3) = d.get(l3off..) else { return cx.drop(p, Ip4InputError::TooShort) };
    let Some(h) = l3.first_chunk::<20>() else { return cx.drop(p, Ip4InputError::TooShort) };
    if h[0] >> 4 != 4 {
        return cx.drop(p, Ip4InputError::BadVersion);
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let Some(hdr) = l3.get(..ihl).filter(|_| ihl >= 20) else { return cx.drop(p, Ip4InputError::BadHdrLen) };
    let tot = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if tot < ihl {
        return cx.drop(p, Ip4InputError::BadLen);
    }
    if tot > l3.len() {
        return cx.drop(p, Ip4InputError::Truncated);
    }
    if checksum::data(hdr) != 0xffff {
        return cx.drop(p, Ip4InputError::BadCsum);
    }
    let src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    let dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
    let src_top = (src >> 24) as u8;
    if src_top >= 224 || src_top == 127 || src_top == 0 {
        return cx.drop(p, Ip4InputError::MartianSrc);
    }
    let want = l3off + tot;
    if top_byte(h[16]) & SPECIAL_DST != 0 || m.flags & flags::L2_MULTI != 0 {
        return ip4_special_dst(cx, p, punt, dst, want);
    }
    cx.pool.meta_mut(p).flags |= flags::L3_CSUM_OK;
    if want < cx.pool.meta(p).len as usize {
        cx.pool.set_len(p, want);
    }
    Ip4InputNext::Lookup as u16
}

/// 224.0.0.18, where VRRP advertisements go (RFC 5798 5.1.1.2).
const VRRP_GROUP: u32 = 0xe000_0012;

/// IP protocol 112, VRRP.
const VRRP_PROTO: u8 = 112;

/// A valid header whose destination is in 0/8, 127/8 or 224/3, or that
/// came in a link-layer broadcast or multicast: multicast and limited
/// broadcast go to Linux ([`Ip4InputNext::Punt`]) or are dropped; 0/8, 127/8 and
/// the rest of 240/4 are never destinations (RFC 1812 5.3.7), and unicast
/// in a link-layer group frame is not routed (RFC 1812 5.3.4).
#[cold]
#[inline(never)]
fn ip4_special_dst(cx: &mut Cx<'_>, p: PktIdx, punt: bool, dst: u32, want: usize) -> u16 {
    let group = (224..240).contains(&(dst >> 24));
    if !punt && dst == u32::MAX {
        return cx.drop(p, Ip4InputError::Broadcast);
    }
    if !punt && group {
        // tern's own VRRP (standalone mode): its advertisements go to
        // ip4-local, which hands them to the control thread.
        let (m, d) = cx.pool.pkt(p);
        if dst == VRRP_GROUP && d.get(usize::from(m.l3_off) + 9) == Some(&VRRP_PROTO) {
            cx.pool.meta_mut(p).flags |= flags::L3_CSUM_OK;
            if want < cx.pool.meta(p).len as usize {
                cx.pool.set_len(p, want);
            }
            return Ip4InputNext::Local as u16;
        }
        return cx.drop(p, Ip4InputError::Multicast);
    }
    if !group && dst != u32::MAX {
        let top = dst >> 24;
        if top == 0 || top == 127 || top >= 240 {
            return cx.drop(p, Ip4InputError::MartianDst);
        }
        if cx.pool.meta(p).flags & flags::L2_MULTI != 0 {
            return cx.drop(p, Ip4InputError::L2Multi);
        }
    }
    cx.pool.meta_mut(p).flags |= flags::L3_CSUM_OK;
    if want < cx.pool.meta(p).len as usize {
        cx.pool.set_len(p, want);
    }
    if group || dst == u32::MAX { Ip4InputNext::Punt as u16 } else { Ip4InputNext::Lookup as u16 }
}

// The fast path: the usual 20-byte header in one test, and the input
// rule set's shortcut.

/// [`ip4_validate`] over a batch, without input rule sets. Its own
/// function, so that the loop's registers are its own.
#[inline(never)]
fn validate_batch(cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16], punt: bool, direct: bool) {
    for (o, &p) in next.iter_mut().zip(pkts) {
        *o = ip4_validate::<NO_FLOW>(cx, p, punt, direct, None);
    }
}

/// `ip4-input`'s validation with input rule sets, for the shortcut's
/// batch loop.
struct Validate4 {
    punt: bool,
    /// `FastPaths::direct`.
    direct: bool,
}

impl ValidateAcl<Pattern> for Validate4 {
    #[inline(always)]
    fn validate<const S: u8>(&self, cx: &mut Cx<'_>, p: PktIdx, acl: &mut InputAcl<'_, Pattern>) -> u16 {
        ip4_validate::<S>(cx, p, self.punt, self.direct, Some(acl))
    }
}

/// Validates one packet's IPv4 header; the next index (lookup, or
/// [`Ip4InputNext::Punt`]: multicast or broadcast for Linux) or a drop.
#[inline(always)]
fn ip4_validate<const S: u8>(
    cx: &mut Cx<'_>,
    p: PktIdx,
    punt: bool,
    direct: bool,
    mut acl: Option<&mut InputAcl<'_, Pattern>>,
) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    // The metadata as the input rule set's shortcut compares it, read
    // before anything writes it (see `meta16`).
    let meta = if S == NO_FLOW { Bytes16::ZERO } else { meta16(m) };
    let l3off = m.l3_off as usize;
    // The common case in one test: version 4 with a 20-byte header, all of
    // it in the frame (with an input rule set, the first 14 transport
    // bytes too, which its shortcut reads). Everything else takes the
    // general path, which gives these packets the same verdicts.
    let (h, h34) = match acl {
        None => (d.get(l3off..).and_then(|l3| l3.first_chunk::<20>()), None),
        Some(_) => match d.get(l3off..).and_then(|l3| l3.first_chunk::<34>()) {
            Some(h34) => (h34.first_chunk::<20>(), Some(h34)),
            None => (None, None),
        },
    };
    let Some(h) = h.filter(|h| h[0] == 0x45 && m.flags & flags::L2_MULTI == 0 && direct) else {
        let n = ip4_validate_general(cx, p, punt);
        return InputAcl::general(acl, n, cx.pool.meta(p).rx_if);
    };
    let tot = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if tot < 20 {
        return cx.drop(p, Ip4InputError::BadLen);
    }
    let want = l3off + tot;
    if want > d.len() {
        return cx.drop(p, Ip4InputError::Truncated);
    }
    if checksum::header20(h) != 0xffff {
        return cx.drop(p, Ip4InputError::BadCsum);
    }
    // A martian source or a destination in 0/8, 127/8 or 224/3, both in
    // one test.
    if top_byte(h[12]) & MARTIAN_SRC | top_byte(h[16]) & SPECIAL_DST != 0 {
        if top_byte(h[12]) & MARTIAN_SRC != 0 {
            return cx.drop(p, Ip4InputError::MartianSrc);
        }
        let dst = u32::from_be_bytes([h[16], h[17], h[18], h[19]]);
        let n = ip4_special_dst(cx, p, punt, dst, want);
        return InputAcl::general(acl, n, cx.pool.meta(p).rx_if);
    }
    m.flags |= flags::L3_CSUM_OK;
    // Ethernet padding: trimming only shortens the data, which the frame
    // still holds (the data is `m.len` bytes, so `want` fits in a u16).
    if want < d.len() {
        m.len = want as u16;
    }
    match acl.as_mut() {
        None => Ip4InputNext::Lookup as u16,
        Some(a) => match h34 {
            Some(h34) => a.direct::<S>(meta, m, h34, h34[33]),
            None => Ip4InputNext::Lookup as u16,
        },
    }
}

/// What an address's first byte says, by that byte: [`MARTIAN_SRC`] for
/// 0/8, 127/8 and 224/3 (not a valid source), [`SPECIAL_DST`] for the same
/// (as destinations: 0/8, 127/8 and 240/4 martian, 224/4 multicast,
/// 255.255.255.255 the limited broadcast).
static TOP_BYTE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        if b == 0 || b == 127 || b >= 224 {
            let (_, from_b) = t.split_at_mut(b);
            if let Some(e) = from_b.first_mut() {
                *e = MARTIAN_SRC | SPECIAL_DST;
            }
        }
        b += 1;
    }
    t
};

/// [`TOP_BYTE`] of first byte `b` (any byte is in the table: no check
/// is left after compiling).
#[inline(always)]
fn top_byte(b: u8) -> u8 {
    TOP_BYTE.get(usize::from(b)).copied().unwrap_or(0)
}
const MARTIAN_SRC: u8 = 1;
const SPECIAL_DST: u8 = 2;
