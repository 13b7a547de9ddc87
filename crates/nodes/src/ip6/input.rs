//! `ip6-input`: validates the fixed IPv6 header (RFC 8200 section 3:
//! version, payload length against the frame), drops martians, trims
//! padding, and sends link-scoped traffic for tern (ND, link-local) to
//! `ip6-local` (through `ip6-punt-acl` when the receiving interface has an
//! input rule set): link-local destinations are never forwarded (RFC 4291
//! section 2.5.6). Multicast groups tern does not listen to are dropped,
//! or with the TAP exception path of Linux mode (`Params::punt_to_tap`)
//! handed to Linux (OSPFv3, MLD), through `ip6-punt-acl` when the
//! receiving interface has an input rule set.
//!
//! Next nodes: `ip6-lookup`, `ip6-local`, `ip6-acl-in` (when the receiving
//! interface has an input rule set, unless the packet's flow is one the
//! rule set accepted: `crate::shortcut`), `linux-punt`,
//! `ip6-punt-acl`, `drop`. Counters: [`Ip6InputError::DESCS`].
//!
//! Config: the interfaces (link-local addresses, input rule sets) and
//! `Params::punt_to_tap`.
//!
//! Example: a packet from 2001:db8:1::2 to 2001:db8:2::2 with its payload
//! in the frame leaves for `ip6-lookup`, its padding trimmed; one to
//! fe80::1 that is not tern's link-local address is dropped as
//! `link-local-not-ours`.
//!
//! Reference: `validate6_general` checks one packet at a time; the fast
//! path, `validate6`, takes the usual addresses in one test with the
//! same verdicts (`direct_tests`), and with input rule sets the flow the
//! rule set last accepted skips `ip6-acl-in` (`crate::shortcut`).

use super::*;

/// The `ip6-input` node (see the module).
pub struct Ip6Input {
    ifs: Snapshot<IfTable>,
    params: Snapshot<crate::state::Params>,
    /// By interface index, whether it has an input rule set; empty when
    /// none has (as `Ip4Input`'s).
    acl_in: Vec<bool>,
    /// The flow the input rule set last accepted.
    shortcut: AclShortcut<Pattern6>,
}

impl Ip6Input {
    pub fn new(shared: &Shared) -> Self {
        let ifs = shared.ifaces.snapshot();
        let acl_in = crate::ip4::acl_in_by_index(ifs.current());
        Ip6Input { ifs, params: shared.params.snapshot(), acl_in, shortcut: AclShortcut::new(shared.acls.snapshot()) }
    }
}

tern_engine::errors! {
    /// `ip6-input`'s counters.
    pub enum Ip6InputError {
        TooShort = drop("too-short", "shorter than an IPv6 header"),
        BadVersion = drop("bad-version", "IP version is not 6"),
        Truncated = drop("truncated", "payload length beyond the frame"),
        MartianSrc = drop("martian-source", "multicast, loopback or IPv4-mapped source, or the unspecified source to a unicast address"),
        BadDst = drop("bad-destination", "unspecified, loopback or IPv4-mapped destination"),
        Multicast = drop("multicast", "multicast group tern does not listen to"),
        LinkLocal = drop("link-local-not-ours", "link-local destination that is not tern's"),
        AclShortcut = info("acl-shortcut", "accepted by the input rule set without ip6-acl-in: a flow it accepted before"),
        L2Multi = drop("l2-multicast", "unicast destination in a link-layer broadcast or multicast (RFC 1812 5.3.4)"),
    }
}

tern_engine::edges! {
    /// `ip6-input`'s next nodes.
    pub enum Ip6InputNext {
        Drop = "drop",
        Lookup = "ip6-lookup",
        /// ND, and link-local or multicast for tern.
        Local = "ip6-local",
        /// The receiving interface has an input rule set.
        AclIn = "ip6-acl-in",
        /// Multicast for Linux (TAP exception path).
        Punt = "linux-punt",
        /// Link-scoped traffic for tern through the input rule set.
        PuntAcl = "ip6-punt-acl",
    }
}

impl Node for Ip6Input {
    fn name(&self) -> &'static str {
        "ip6-input"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip6InputNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip6InputError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        if self.ifs.refresh() {
            self.acl_in = crate::ip4::acl_in_by_index(self.ifs.current());
        }
        self.params.refresh();
        let ifs = self.ifs.current();
        let params = self.params.current();
        let (punt, fast) = (params.punt_to_tap(), params.fast_paths);
        if self.acl_in.is_empty() {
            for (o, &p) in next.iter_mut().zip(pkts) {
                *o = validate6::<NO_FLOW>(cx, ifs, p, punt, fast.direct, None);
            }
        } else {
            // The shortcut is the direct path's (as in `ip4-input`).
            let v = Validate6 { ifs, punt, direct: fast.direct };
            let tables = (&self.acl_in[..], ifs, self.ifs.generation());
            let on = (fast.direct && fast.acl_shortcut, Ip6InputError::AclShortcut as u16);
            self.shortcut.input_batch(cx, (pkts, next), &v, tables, on);
        }
        if fast.direct && cx.tracing() {
            self.trace_fast(cx, pkts, next);
        }
    }
}

impl Ip6Input {
    /// Notes on the traced packets of a batch what the fast path did (as
    /// `ip4-input`'s).
    #[cold]
    #[inline(never)]
    fn trace_fast(&self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &[u16]) {
        for (&p, &n) in pkts.iter().zip(next) {
            let (m, d) = cx.pool.pkt(p);
            if m.flags & flags::TRACED == 0 || n != Ip6InputNext::Lookup as u16 {
                continue;
            }
            let Some(h) = d.get(usize::from(m.l3_off)..).and_then(<[u8]>::first_chunk::<40>) else { continue };
            if !direct6(h, m.flags) {
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

/// Whether a packet with this fixed header and these metadata flags
/// takes [`validate6`]'s direct path (when it is on).
#[inline(always)]
fn direct6(h: &[u8; 40], mflags: u16) -> bool {
    h[0] >> 4 == 6 && top6(h[8]) & GENERAL_SRC | top6(h[24]) & GENERAL_DST == 0 && mflags & flags::L2_MULTI == 0
}

/// The reference: one packet's fixed IPv6 header, every check in turn;
/// the next index or a drop. [`validate6`] takes the usual packet faster
/// with the same verdicts.
#[inline(never)]
fn validate6_general(cx: &mut Cx<'_>, ifs: &IfTable, p: PktIdx, punt: bool) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    let l3off = m.l3_off as usize;
    let Some(l3) = d.get(l3off..) else { return cx.drop(p, Ip6InputError::TooShort) };
    let Some(h) = l3.first_chunk::<40>() else { return cx.drop(p, Ip6InputError::TooShort) };
    if h[0] >> 4 != 6 {
        return cx.drop(p, Ip6InputError::BadVersion);
    }
    // The 40 bytes are there: the view's reads are in bounds.
    let ip = tern_wire::Ipv6Packet::new_unchecked(&h[..]);
    let total = 40 + usize::from(ip.payload_len());
    if total > l3.len() {
        return cx.drop(p, Ip6InputError::Truncated);
    }
    let src = u128::from(ip.src_addr());
    let dst = ip.dst_addr_u128();
    // Multicast and loopback sources, and (RFC 4291 2.5.2) the unspecified
    // one but to a multicast group (ND's duplicate address detection).
    // IPv4-mapped addresses (::ffff:0:0/96, RFC 4291 2.5.5.2) stand for
    // IPv4 nodes inside one host's API and are not forwardable (RFC 6890),
    // as source or destination.
    let mapped = |a: u128| a >> 32 == 0xffff;
    if src >> 120 == 0xff || src == 1 || (src == 0 && dst >> 120 != 0xff) || mapped(src) {
        return cx.drop(p, Ip6InputError::MartianSrc);
    }
    if dst == 0 || dst == 1 || mapped(dst) {
        return cx.drop(p, Ip6InputError::BadDst);
    }
    let next = if dst >> 120 == 0xff {
        // Link-scope all-nodes, all-routers and solicited-node groups.
        let is_all =
            dst == 0xff02_0000_0000_0000_0000_0000_0000_0001 || dst == 0xff02_0000_0000_0000_0000_0000_0000_0002;
        let is_sol = dst >> 24 == 0x00ff_0200_0000_0000_0000_0000_01ff; // ff02::1:ff00:0/104
        // ff02::12: VRRP advertisements (RFC 5798 5.1.2.2); ip6-local
        // hands them to tern's own VRRP or leaves them to Linux.
        let is_vrrp = dst == 0xff02_0000_0000_0000_0000_0000_0000_0012;
        if is_all || is_sol || is_vrrp {
            Ip6InputNext::Local as u16
        } else if punt {
            Ip6InputNext::Punt as u16
        } else {
            return cx.drop(p, Ip6InputError::Multicast);
        }
    } else if is_link_local(Ipv6Addr::from(dst)) {
        match ifs.get(m.rx_if) {
            Some(i) if u128::from(i.v6_ll) == dst => Ip6InputNext::Local as u16,
            _ => return cx.drop(p, Ip6InputError::LinkLocal),
        }
    } else if m.flags & flags::L2_MULTI != 0 {
        // RFC 1812 5.3.4 (RFC 8504): unicast in a link-layer broadcast or
        // multicast is not routed.
        return cx.drop(p, Ip6InputError::L2Multi);
    } else {
        Ip6InputNext::Lookup as u16
    };
    let want = l3off + total;
    if want < d.len() {
        cx.pool.set_len(p, want);
    }
    next
}

// The fast path: the usual addresses in one test, and the input rule
// set's shortcut.

/// `ip6-input`'s validation with input rule sets, for the shortcut's
/// batch loop.
struct Validate6<'a> {
    ifs: &'a IfTable,
    punt: bool,
    /// `FastPaths::direct`.
    direct: bool,
}

impl ValidateAcl<Pattern6> for Validate6<'_> {
    #[inline(always)]
    fn validate<const S: u8>(&self, cx: &mut Cx<'_>, p: PktIdx, acl: &mut InputAcl<'_, Pattern6>) -> u16 {
        validate6::<S>(cx, self.ifs, p, self.punt, self.direct, Some(acl))
    }
}

/// Validates one packet's IPv6 header: the next index or a drop. With
/// input rule sets (`acl`), a packet bound for `ip6-lookup` goes through
/// its interface's rule set first (`ip6-acl-in`) unless the shortcut
/// takes it (`S`: how to ask, as `ip4-input`), and link-scoped traffic
/// for tern or Linux through `ip6-punt-acl`.
#[inline(always)]
fn validate6<const S: u8>(
    cx: &mut Cx<'_>,
    ifs: &IfTable,
    p: PktIdx,
    punt: bool,
    direct: bool,
    acl: Option<&mut InputAcl<'_, Pattern6>>,
) -> u16 {
    let (m, d) = cx.pool.pkt(p);
    // The metadata as the shortcut compares it, read before anything
    // writes it (see `meta16`).
    let meta = if S == NO_FLOW { Bytes16::ZERO } else { meta16(m) };
    let l3off = m.l3_off as usize;
    // The common case in one go: version 6, the payload in the frame, a
    // source and a destination whose first bytes rule out every address
    // the general checks look for (::/8 holds :: and ::1, ff00::/8 is
    // multicast, fe00::/8 holds link-local). Everything else takes the
    // general path, which gives these packets the same verdicts. With
    // input rule sets, the first 8 transport bytes must be in the frame
    // too (the shortcut reads them).
    let (h, h48) = match acl {
        None => (d.get(l3off..).and_then(<[u8]>::first_chunk::<40>), None),
        Some(_) => match d.get(l3off..).and_then(<[u8]>::first_chunk::<48>) {
            Some(h48) => (h48.first_chunk::<40>(), Some(h48)),
            None => (None, None),
        },
    };
    if let Some(h) = h
        && direct
        && direct6(h, m.flags)
    {
        let want = l3off + 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
        if want > d.len() {
            return cx.drop(p, Ip6InputError::Truncated);
        }
        if want < d.len() {
            m.len = want as u16;
        }
        return match (acl, h48) {
            (Some(a), Some(h48)) => {
                let tcp = if S == TCP_FLOW { d.get(l3off + 53).copied().unwrap_or(0) } else { 0 };
                a.direct::<S>(meta, m, h48, tcp)
            }
            _ => Ip6InputNext::Lookup as u16,
        };
    }
    let n = validate6_general(cx, ifs, p, punt);
    InputAcl::general(acl, n, cx.pool.meta(p).rx_if)
}

/// First bytes of IPv6 addresses the direct path of [`validate6`] leaves
/// to the general checks: as a source ::/8 and ff00::/8, as a destination
/// ::/8, fe00::/8 and ff00::/8.
static TOP6: [u8; 256] = {
    let mut t = [0u8; 256];
    t[0] = GENERAL_SRC | GENERAL_DST;
    t[0xfe] = GENERAL_DST;
    t[0xff] = GENERAL_SRC | GENERAL_DST;
    t
};
const GENERAL_SRC: u8 = 1;

/// [`TOP6`] of first byte `b` (any byte is in the table: no check is
/// left after compiling).
#[inline(always)]
fn top6(b: u8) -> u8 {
    TOP6.get(usize::from(b)).copied().unwrap_or(0)
}
const GENERAL_DST: u8 = 2;
