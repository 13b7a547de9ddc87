//! `ip6-local`: IPv6 packets for tern itself: echo requests (RFC 4443 4.1),
//! Neighbour Discovery (RFC 4861: answers solicitations for its addresses,
//! learns from solicitations and advertisements, validating hop limit 255
//! and code 0 as section 7.1.1/7.1.2 require), and ICMPv6 port unreachable
//! for UDP it does not serve. With tern's own IKE (`Params::ike_local`,
//! standalone mode), UDP to port 500 goes to the IKE service's queue
//! (`Shared::ike_rx`, see [`crate::ike`]); IKE on 4500 is handed over by
//! `esp-decrypt`.
//!
//! In Linux mode (`Params::linux_owns_local`) the kernel answers echo,
//! solicitations and everything else for the router (it saw the frame
//! too); tern only learns neighbours from ND and counts the rest as
//! `left-to-linux`. With the TAP exception path (`Params::punt_to_tap`)
//! the kernel has no copy: what it owns goes to `linux-punt` (echo,
//! solicitations for its addresses, advertisements after tern learned from
//! them, router discovery, other ICMPv6, other protocols, fragments).
//!
//! Next nodes: `ip6-lookup` (echo replies to global addresses),
//! `interface-output` (ND answers and replies to link-local sources, sent
//! straight back on the link), `ip6-icmp-error`, `gre-input`,
//! `esp-decrypt` (ESP and UDP 4500, in both modes but IKE in Linux mode, and UDP to an SA's other local `udp_encap` port),
//! `ip6-reassembly` (fragments: all in standalone mode, ESP's and GRE's in
//! Linux mode, and UDP's where the kernel has its own copy, for ESP in
//! UDP; see [`crate::reass`]), `linux-punt`, `drop`.
//! Counters: [`Ip6LocalError::DESCS`].
//!
//! Config: the interfaces' addresses, `Params::linux_owns_local` and
//! `Params::punt_to_tap`; learned neighbours go to the control thread's
//! event queue.
//!
//! Example: a neighbour solicitation for tern's 2001:db8:1::1 is answered
//! with an advertisement sent straight back on the link
//! (`interface-output`), counted as `ns-answered`.
//!
//! Reference: one loop, `local6` per packet; there is no fast path.

use super::*;
use tern_wire::{Icmpv6Packet, Icmpv6Type, Ipv6Packet};

/// The `ip6-local` node (see the module).
pub struct Ip6Local {
    ifs: Snapshot<IfTable>,
    params: Snapshot<crate::state::Params>,
    /// The SAs' local ESP-in-UDP ports ([`crate::ipsec::is_udp_encap_esp`]).
    sas: Snapshot<tern_ipsec::SaTable>,
    shared: Shared,
}

impl Ip6Local {
    pub fn new(shared: &Shared) -> Self {
        Ip6Local {
            ifs: shared.ifaces.snapshot(),
            params: shared.params.snapshot(),
            sas: shared.sas.snapshot(),
            shared: shared.clone(),
        }
    }
}

tern_engine::errors! {
    /// `ip6-local`'s counters.
    pub enum Ip6LocalError {
        BadExt = drop("bad-extension-header", "extension header chain malformed or too long"),
        BadIcmp = drop("bad-icmp", "ICMPv6 message too short or with a bad checksum"),
        Echo = info("echo-reply-sent", "echo requests answered"),
        McastEcho = drop("multicast-echo", "echo request to a multicast group (not answered)"),
        NsAnswered = info("ns-answered", "neighbour solicitations for our addresses answered"),
        NsOther = drop("ns-not-ours", "neighbour solicitation for an address that is not ours"),
        Na = drop("na-received", "neighbour advertisements consumed (learned)"),
        BadNd = drop("bad-nd", "ND message failing RFC 4861 validation"),
        NdIgnored = drop("nd-ignored", "router solicitation/advertisement or redirect (not handled)"),
        IcmpOther = drop("icmp-consumed", "ICMPv6 for the router other than echo request and ND"),
        Tcp = drop("tcp-to-router", "TCP segment for the router (no local service)"),
        Udp = info("udp-port-unreachable", "UDP datagram for the router (ICMPv6 port unreachable)"),
        Proto = drop("protocol-unhandled", "other upper-layer protocol for the router"),
        EventsFull = info("event-queue-full", "a learned neighbour could not be reported"),
        NoIf = drop("no-interface", "received on an unknown interface"),
        Linux = drop("left-to-linux", "for the router in Linux mode: the kernel got its own copy and answers it"),
        Vrrp = drop("vrrp-to-control", "VRRP advertisements handed to the control thread (consumed here)"),
        VrrpFull = drop("vrrp-queue-full", "VRRP advertisements dropped: the control thread's queue was full"),
        IkeToControl = info("ike-to-control", "IKE (UDP 500) handed to the IKE service (standalone mode, [[ike]])"),
        IkeFull = drop("ike-queue-full", "IKE (UDP 500) dropped: the IKE service's queue was full"),
    }
}

tern_engine::edges! {
    /// `ip6-local`'s next nodes.
    pub enum Ip6LocalNext {
        Drop = "drop",
        /// Echo replies to global addresses.
        Lookup = "ip6-lookup",
        /// ND answers and replies to link-local sources.
        Output = "interface-output",
        Icmp = "ip6-icmp-error",
        Gre = "gre-input",
        Punt = "linux-punt",
        Esp = "esp-decrypt",
        /// Fragments (see [`crate::reass`]).
        Reass = "ip6-reassembly",
    }
}

impl Node for Ip6Local {
    fn name(&self) -> &'static str {
        "ip6-local"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip6LocalNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip6LocalError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.params.refresh();
        self.sas.refresh();
        let params = self.params.current();
        let sas = self.sas.current();
        let linux = if params.punt_to_tap() {
            Linux::Punt
        } else if params.linux_owns_local {
            Linux::HasCopy
        } else {
            Linux::No
        };
        let ike = params.ike_local && linux == Linux::No;
        let mut pushed = false;
        for (o, &p) in next.iter_mut().zip(pkts) {
            let ifs = self.ifs.current();
            *o = local6(cx, (ifs, sas), &self.shared, p, linux, params, (ike, &mut pushed));
        }
        if pushed {
            self.shared.ike_bell.ring();
        }
    }
}

/// Who answers for the router in `ip6-local`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Linux {
    /// tern (standalone mode).
    No,
    /// Linux, which saw the frame itself.
    HasCopy,
    /// Linux, through the TAP exception path.
    Punt,
}

impl Linux {
    /// What becomes of a packet Linux answers: punted, or dropped as
    /// left to Linux; `None` in standalone mode.
    fn leave(self, cx: &mut Cx<'_>, p: PktIdx) -> Option<u16> {
        match self {
            Linux::No => None,
            Linux::HasCopy => Some(cx.drop(p, Ip6LocalError::Linux)),
            Linux::Punt => Some(Ip6LocalNext::Punt as u16),
        }
    }
}

fn local6(
    cx: &mut Cx<'_>,
    (ifs, sas): (&IfTable, &tern_ipsec::SaTable),
    shared: &Shared,
    p: PktIdx,
    linux: Linux,
    params: &crate::state::Params,
    (ike, pushed): (bool, &mut bool),
) -> u16 {
    let m = *cx.pool.meta(p);
    let Some(iface) = ifs.get(m.rx_if) else { return cx.drop(p, Ip6LocalError::NoIf) };
    let l3off = m.l3_off as usize;
    let d = cx.pool.data(p);
    let l3 = d.get(l3off..).unwrap_or_default();
    // ip6-input validated the fixed header; a packet without one (a bug
    // upstream) is dropped as the engine's `unspecified`.
    let Some(ip) = l3.get(..40).map(Ipv6Packet::new_unchecked) else { return NEXT_DROP };
    let walk = match ipv6ext::walk(ip.next_header(), l3.get(40..).unwrap_or_default()) {
        Ok(w) => w,
        Err(_) => return cx.drop(p, Ip6LocalError::BadExt),
    };
    // An atomic fragment (offset 0, no more) is a whole packet (RFC 6946).
    if walk.fragment_offset.is_some_and(|f| !crate::ipsec::is_atomic_fragment(l3.get(40..).unwrap_or_default(), f)) {
        // Put back together: all in standalone mode; in Linux mode ESP's
        // and GRE's (tern's; the fragment header's next header, which a
        // later fragment's walk reports), and UDP's where the kernel has
        // its own copy (AF_PACKET: ESP in UDP is tern's, the rest is left
        // to Linux once whole); the rest is the kernel's.
        let ours = matches!(walk.upper_protocol.0, crate::ipsec::IPPROTO_ESP | 47)
            || (walk.upper_protocol == IpProtocol::UDP && linux == Linux::HasCopy);
        if linux == Linux::No || ours {
            return Ip6LocalNext::Reass as u16;
        }
        return linux.leave(cx, p).unwrap_or(NEXT_DROP);
    }
    let up = 40 + walk.upper_offset;
    let (src, dst, hop) = (ip.src_addr(), ip.dst_addr(), ip.hop_limit());
    let l2_src = crate::icmp::l2_source(d, l3off);
    match walk.upper_protocol {
        IpProtocol::ICMPV6 => {}
        IpProtocol::GRE => return Ip6LocalNext::Gre as u16,
        IpProtocol(crate::ipsec::IPPROTO_ESP) => return Ip6LocalNext::Esp as u16,
        IpProtocol::UDP
            if crate::ipsec::is_udp_encap_esp(
                walk.upper_protocol,
                l3.get(up..).unwrap_or_default(),
                linux != Linux::No,
                sas,
            ) =>
        {
            return Ip6LocalNext::Esp as u16;
        }
        _ if linux != Linux::No => return linux.leave(cx, p).unwrap_or(NEXT_DROP),
        IpProtocol(112) => {
            // tern's own VRRP reads its advertisements on the control thread.
            let total = (40 + usize::from(ip.payload_len())).min(l3.len());
            let packet = l3.get(..total).unwrap_or_default().to_vec();
            if shared.control_rx.push(crate::state::Punted { ifindex: iface.index, packet }).is_err() {
                return cx.drop(p, Ip6LocalError::VrrpFull);
            }
            return cx.drop(p, Ip6LocalError::Vrrp);
        }
        IpProtocol::UDP => {
            let udp = l3.get(up..(40 + usize::from(ip.payload_len())).min(l3.len())).unwrap_or_default();
            // (A UDP header cut short is answered as any UDP.)
            if ike
                && udp.get(2..4) == Some(&crate::ike::IKE_PORT.to_be_bytes()[..])
                && let Some(d) = crate::ike::datagram(dst.into(), src.into(), iface.index, udp, 0)
            {
                if shared.ike_rx.push(d).is_err() {
                    return cx.drop(p, Ip6LocalError::IkeFull);
                }
                *pushed = true;
                return cx.drop(p, Ip6LocalError::IkeToControl);
            }
            cx.pool.meta_mut(p).aux = icmp_aux(ICMP6_DEST_UNREACH, U6_PORT, 0);
            cx.count(Ip6LocalError::Udp, 1);
            return Ip6LocalNext::Icmp as u16;
        }
        IpProtocol::TCP => return cx.drop(p, Ip6LocalError::Tcp),
        _ => return cx.drop(p, Ip6LocalError::Proto),
    }
    let icmp = l3.get(up..).unwrap_or_default();
    if icmp.len() < 8 {
        return cx.drop(p, Ip6LocalError::BadIcmp);
    }
    let pseudo = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, icmp.len() as u32);
    if checksum::add(pseudo, checksum::data(icmp)) != 0xffff {
        return cx.drop(p, Ip6LocalError::BadIcmp);
    }
    // 8 bytes: the view's reads are in bounds.
    let (ty, code) = (Icmpv6Packet::new_unchecked(icmp).msg_type().0, Icmpv6Packet::new_unchecked(icmp).msg_code());
    match ty {
        128 => {
            if let Some(n) = linux.leave(cx, p) {
                return n;
            }
            if dst.segments()[0] >> 8 == 0xff {
                return cx.drop(p, Ip6LocalError::McastEcho);
            }
            echo_reply6(cx, iface, p, up, l2_src)
        }
        135 | 136 => {
            let Some(target) = addr(icmp, 8).filter(|_| hop == 255 && code == 0) else {
                return cx.drop(p, Ip6LocalError::BadNd);
            };
            if target.segments()[0] >> 8 == 0xff {
                return cx.drop(p, Ip6LocalError::BadNd);
            }
            if ty == 136 {
                let Some((target, mac, how)) = parse_na(icmp, dst) else { return cx.drop(p, Ip6LocalError::BadNd) };
                // With or without the target's link-layer address: an
                // answer to a unicast probe often comes without it
                // (RFC 4861 7.2.4) and still confirms the neighbour.
                let ev = Event::Neighbor { ifindex: iface.index, ip: IpAddr::V6(target), mac, how };
                if shared.events.push(ev).is_err() {
                    cx.count(Ip6LocalError::EventsFull, 1);
                }
                // The kernel's own solicitations wait for these.
                return if linux == Linux::Punt { Ip6LocalNext::Punt as u16 } else { cx.drop(p, Ip6LocalError::Na) };
            }
            let Some(opt_ll) = nd_lladdr(icmp.get(24..).unwrap_or_default(), 1) else {
                return cx.drop(p, Ip6LocalError::BadNd);
            };
            let dad = src.is_unspecified();
            if dad && (opt_ll.is_some() || dst.segments()[0] != 0xff02) {
                return cx.drop(p, Ip6LocalError::BadNd);
            }
            // A VRRP virtual address while master is answered with its
            // virtual MAC (RFC 5798 6.4.3).
            let vmac = params.virtual_mac(iface.index, IpAddr::V6(target));
            if !iface.has_v6(target) && vmac.is_none() {
                return cx.drop(p, Ip6LocalError::NsOther);
            }
            if !dad
                && let Some(mac) = opt_ll
                && shared
                    .events
                    .push(Event::Neighbor {
                        ifindex: iface.index,
                        ip: IpAddr::V6(src),
                        mac: Some(mac),
                        how: Heard::Sender { create: true },
                    })
                    .is_err()
            {
                cx.count(Ip6LocalError::EventsFull, 1);
            }
            if let Some(n) = linux.leave(cx, p) {
                // The kernel answers the solicitation for its address.
                return n;
            }
            let (to_ip, to_mac) = if dad {
                (Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1), [0x33, 0x33, 0, 0, 0, 1])
            } else {
                (src, opt_ll.unwrap_or(l2_src))
            };
            if !build_na(cx, iface, p, target, (to_ip, to_mac), !dad, vmac) {
                // No room for the advertisement's link-layer header.
                return cx.drop(p, Ip6LocalError::BadIcmp);
            }
            cx.count(Ip6LocalError::NsAnswered, 1);
            Ip6LocalNext::Output as u16
        }
        _ if linux == Linux::Punt => Ip6LocalNext::Punt as u16,
        133 | 134 | 137 => cx.drop(p, Ip6LocalError::NdIgnored),
        _ => cx.drop(p, Ip6LocalError::IcmpOther),
    }
}

/// A neighbour advertisement's ICMPv6 message (type 136, hop limit and
/// code already checked), sent to `dst`: its target, the target
/// link-layer address option if present, and its flags (RFC 4861 4.4).
/// `None` when it fails RFC 4861 7.1.2 validation: too short, a multicast
/// target, malformed options, or solicited yet sent to a multicast group.
fn parse_na(icmp: &[u8], dst: Ipv6Addr) -> Option<(Ipv6Addr, Option<[u8; 6]>, Heard)> {
    let target = addr(icmp, 8)?;
    if target.segments()[0] >> 8 == 0xff {
        return None;
    }
    let mac = nd_lladdr(icmp.get(24..)?, 2)?;
    let fl = *icmp.get(4)?;
    let (router, solicited, override_) = (fl & 0x80 != 0, fl & 0x40 != 0, fl & 0x20 != 0);
    if solicited && dst.segments()[0] >> 8 == 0xff {
        return None;
    }
    Some((target, mac, Heard::Advert { solicited, override_, router }))
}

/// The link-layer address option of type `want` in an ND options area.
/// `None`: options malformed; `Some(None)`: absent.
fn nd_lladdr(mut opts: &[u8], want: u8) -> Option<Option<[u8; 6]>> {
    let mut found = None;
    for _ in 0..tern_wire::ndisc::MAX_ND_OPTIONS {
        let (kind, units) = match opts {
            [] => return Some(found),
            [_] => return None,
            [kind, units, ..] => (*kind, *units),
        };
        let len = usize::from(units) * 8;
        if len == 0 || len > opts.len() {
            return None;
        }
        if kind == want
            && let Some(mac) = opts.get(2..8).and_then(|m| <[u8; 6]>::try_from(m).ok())
        {
            found = Some(mac);
        }
        opts = opts.get(len..)?;
    }
    None
}

/// Turns the echo request in `p` into its reply (type 129, addresses
/// swapped, any extension headers removed).
fn echo_reply6(cx: &mut Cx<'_>, iface: &Iface, p: PktIdx, up: usize, l2_src: [u8; 6]) -> u16 {
    let l3off = cx.pool.meta(p).l3_off as usize;
    let total = cx.pool.data(p).len().saturating_sub(l3off);
    let icmp_len = total.saturating_sub(up);
    let d = cx.pool.data_mut(p);
    // local6 read the header and the 8-byte message at `up`.
    let Some(l3) = d.get_mut(l3off..).filter(|l3| up >= 40 && l3.len() >= up + 8) else { return NEXT_DROP };
    if up != 40 {
        l3.copy_within(up..total, 40);
    }
    let Some((h, icmp)) = l3.split_first_chunk_mut::<40>() else { return NEXT_DROP };
    let Some(icmp) = icmp.first_chunk_mut::<8>() else { return NEXT_DROP };
    let mut ip = Ipv6Packet::new_unchecked(&mut h[..]);
    ip.set_next_header(IpProtocol::ICMPV6);
    ip.set_payload_len(icmp_len as u16);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    ip.set_src_addr(dst);
    ip.set_dst_addr(src);
    ip.set_hop_limit(64);
    let mut icmp = Icmpv6Packet::new_unchecked(&mut icmp[..]);
    // The pseudo-header sums the same two addresses, so only the type
    // word changes (RFC 1624).
    let code = icmp.msg_code();
    let c = checksum::update(icmp.checksum(), u16::from_be_bytes([128, code]), u16::from_be_bytes([129, code]));
    icmp.set_msg_type(Icmpv6Type(129));
    icmp.set_checksum(c);
    cx.pool.set_len(p, l3off + 40 + icmp_len);
    let m = cx.pool.meta_mut(p);
    m.flags |= flags::LOCAL_ORIGIN;
    cx.count(Ip6LocalError::Echo, 1);
    let dst = src;
    if is_link_local(dst) {
        // No route exists for link-local destinations: answer on the link.
        return send_on_link(cx, iface, p, l2_src);
    }
    Ip6LocalNext::Lookup as u16
}

/// Sends `p` (L3 ready) back out of `iface` to `mac`.
fn send_on_link(cx: &mut Cx<'_>, iface: &Iface, p: PktIdx, mac: [u8; 6]) -> u16 {
    if !set_l2_len(cx.pool, p, iface.l2_len()) {
        return cx.drop(p, Ip6LocalError::BadIcmp);
    }
    let (m, d) = cx.pool.pkt_mut(p);
    write_l2(d, mac, iface, ETH_P_IPV6);
    m.tx_if = iface.index;
    Ip6LocalNext::Output as u16
}

/// Rewrites `p` into a neighbour advertisement for `target` (RFC 4861
/// 7.2.4): router flag, solicited flag as asked, override, target
/// link-layer address option. False (the packet half written) when the
/// buffer has no room for it.
fn build_na(
    cx: &mut Cx<'_>,
    iface: &Iface,
    p: PktIdx,
    target: Ipv6Addr,
    (to_ip, to_mac): (Ipv6Addr, [u8; 6]),
    solicited: bool,
    vmac: Option<[u8; 6]>,
) -> bool {
    let l3off = cx.pool.meta(p).l3_off as usize;
    cx.pool.set_len(p, l3off + 72);
    {
        let d = cx.pool.data_mut(p);
        // set_len gave the packet 72 bytes of L3 (ip6-local's packets
        // have at least 48); nothing is written if it could not.
        let Some((l3, icmp)) = d.get_mut(l3off..).and_then(<[u8]>::split_first_chunk_mut::<40>) else {
            return false;
        };
        let Some(icmp) = icmp.first_chunk_mut::<32>() else { return false };
        l3[..8].copy_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
        l3[8..24].copy_from_slice(&target.octets());
        l3[24..40].copy_from_slice(&to_ip.octets());
        icmp[0] = 136;
        icmp[1] = 0;
        icmp[2] = 0;
        icmp[3] = 0;
        icmp[4] = 0x80 | if solicited { 0x40 } else { 0 } | 0x20;
        icmp[5..8].fill(0);
        icmp[8..24].copy_from_slice(&target.octets());
        icmp[24] = 2;
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&vmac.unwrap_or(iface.mac));
        let pseudo = checksum::pseudo_header_v6(target, to_ip, IpProtocol::ICMPV6, 32);
        let c = !checksum::add(pseudo, checksum::data(icmp));
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
    }
    cx.pool.meta_mut(p).flags |= flags::LOCAL_ORIGIN;
    if !set_l2_len(cx.pool, p, iface.l2_len()) {
        return false;
    }
    let (m, d) = cx.pool.pkt_mut(p);
    write_l2(d, to_mac, iface, ETH_P_IPV6);
    if let (Some(mac), Some(src)) = (vmac, d.get_mut(6..12)) {
        src.copy_from_slice(&mac);
    }
    m.tx_if = iface.index;
    true
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// An NA's ICMPv6 message: flags byte, target ::9 in 2001:db8::/64,
    /// then `opts`.
    fn na(flags: u8, opts: &[u8]) -> Vec<u8> {
        let mut m = vec![136, 0, 0, 0, flags, 0, 0, 0];
        m.extend_from_slice(&"2001:db8::9".parse::<Ipv6Addr>().expect("a").octets());
        m.extend_from_slice(opts);
        m
    }

    const TLLA: [u8; 8] = [2, 1, 2, 0, 0, 0, 0, 9];
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];

    fn unicast() -> Ipv6Addr {
        "2001:db8::1".parse().expect("a")
    }

    #[test]
    fn na_with_target_link_layer_address_and_flags() {
        let (t, mac, how) = parse_na(&na(0x60, &TLLA), unicast()).expect("valid");
        assert_eq!(t, "2001:db8::9".parse::<Ipv6Addr>().expect("a"));
        assert_eq!(mac, Some(MAC));
        assert_eq!(how, Heard::Advert { solicited: true, override_: true, router: false });
        let (_, _, how) = parse_na(&na(0xa0, &TLLA), unicast()).expect("valid");
        assert_eq!(how, Heard::Advert { solicited: false, override_: true, router: true });
    }

    #[test]
    fn na_without_target_link_layer_address_is_kept() {
        // What Linux sends in answer to a unicast NS: S set, O clear, no
        // option (RFC 4861 7.2.4).
        let (_, mac, how) = parse_na(&na(0x40, &[]), unicast()).expect("valid without the option");
        assert_eq!(mac, None);
        assert_eq!(how, Heard::Advert { solicited: true, override_: false, router: false });
        // A source link-layer option (type 1) is not the target's.
        let (_, mac, _) = parse_na(&na(0x40, &[1, 1, 2, 0, 0, 0, 0, 7]), unicast()).expect("valid");
        assert_eq!(mac, None);
    }

    #[test]
    fn invalid_nas_are_refused() {
        let all_nodes: Ipv6Addr = "ff02::1".parse().expect("a");
        assert!(parse_na(&na(0x40, &TLLA), all_nodes).is_none(), "solicited to multicast");
        assert!(parse_na(&na(0x20, &TLLA), all_nodes).is_some(), "unsolicited to multicast is fine");
        assert!(parse_na(&na(0x40, &[2, 0, 0, 0, 0, 0, 0, 0]), unicast()).is_none(), "zero-length option");
        assert!(parse_na(&na(0x40, &[2, 2, 0, 0]), unicast()).is_none(), "option longer than the message");
        assert!(parse_na(&na(0x40, &[])[..20], unicast()).is_none(), "truncated");
        let mut m = na(0x40, &[]);
        m[8] = 0xff;
        assert!(parse_na(&m, unicast()).is_none(), "multicast target");
    }
}
