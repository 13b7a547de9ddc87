//! `ip4-local`: packets addressed to one of tern's own addresses. Answers
//! ICMP echo requests (RFC 792, RFC 1812 4.3.3.6) and answers UDP and other
//! protocols it does not serve with ICMP unreachable (port, protocol), as a
//! host would (RFC 1122 3.2.2.1).
//!
//! GRE packets go to `gre-input`, which decapsulates those of configured
//! tunnels; ESP and UDP to port 4500 (ESP in UDP, RFC 3948) go to
//! `esp-decrypt`, as does UDP to another port an SA uses as its local
//! ESP-in-UDP port (`udp_encap`'s `src_port`, [`tern_ipsec::SaTable::encap_ports`]);
//! UDP to any other port is answered as below. VRRP advertisements (protocol 112, from `ip4-input` when
//! sent to 224.0.0.18) go to the control thread's queue
//! (`Shared::control_rx`), where tern's own VRRP reads them. With tern's
//! own IKE (`Params::ike_local`, standalone mode), UDP to port 500 goes to
//! the IKE service's queue (`Shared::ike_rx`, see [`crate::ike`]) instead
//! of ICMP port unreachable; IKE on 4500 is handed over by `esp-decrypt`.
//!
//! In Linux mode (`Params::linux_owns_local`) the kernel received its own
//! copy of the frame and answers it (ping, BGP, SSH, ...): tern drops its
//! copy, counted as `left-to-linux`, so nothing is answered twice. GRE and
//! ESP of tern's own tunnels are still decapsulated here (IKE, UDP 4500
//! with the non-ESP marker, is the kernel's). With the TAP exception
//! path (`Params::punt_to_tap`) the kernel has no copy: the packet goes
//! to `linux-punt` instead.
//!
//! Fragments go to `ip4-reassembly` (see [`crate::reass`]), which sends
//! the datagram back here: all of them in standalone mode, those of ESP
//! and GRE in Linux mode, and UDP's where the kernel has its own copy
//! (AF_PACKET, for ESP in UDP; the rest is then `left-to-linux`); the
//! others are the kernel's.
//!
//! Next nodes: `ip4-lookup` (the echo reply), `ip4-icmp-error`,
//! `gre-input`, `esp-decrypt`, `ip4-reassembly`, `linux-punt`, `drop`. Counters: [`Ip4LocalError::DESCS`].
//!
//! Config: `Params::linux_owns_local`, `Params::punt_to_tap`, the SAs'
//! `udp_encap` ports.
//!
//! Example: an echo request to 10.0.1.1 (tern's address on `lan`) becomes
//! the echo reply, addresses swapped, and leaves for `ip4-lookup`, counted
//! as `echo-reply-sent`; a UDP datagram to 10.0.1.1 leaves for
//! `ip4-icmp-error` (port unreachable).
//!
//! Reference: one loop, `local4` per packet; there is no fast path.

#![deny(clippy::indexing_slicing)]

use super::*;
use tern_wire::{Icmpv4Packet, Icmpv4Type, IpProtocol, Ipv4Packet};

/// The `ip4-local` node (see the module).
pub struct Ip4Local {
    params: Snapshot<crate::state::Params>,
    /// The SAs' local ESP-in-UDP ports ([`crate::ipsec::is_udp_encap_esp`]).
    sas: Snapshot<tern_ipsec::SaTable>,
    control_rx: std::sync::Arc<crossbeam_queue::ArrayQueue<crate::state::Punted>>,
    ike_rx: std::sync::Arc<crossbeam_queue::ArrayQueue<crate::state::IkeDatagram>>,
    ike_bell: std::sync::Arc<crate::state::Doorbell>,
}

impl Ip4Local {
    pub fn new(shared: &crate::state::Shared) -> Self {
        Ip4Local {
            params: shared.params.snapshot(),
            sas: shared.sas.snapshot(),
            control_rx: shared.control_rx.clone(),
            ike_rx: shared.ike_rx.clone(),
            ike_bell: shared.ike_bell.clone(),
        }
    }
}

/// Where `local4` hands IKE datagrams (standalone mode with
/// `Params::ike_local`; `None` otherwise), and whether it did this batch.
struct Ike<'a> {
    rx: Option<&'a crossbeam_queue::ArrayQueue<crate::state::IkeDatagram>>,
    pushed: bool,
}

tern_engine::errors! {
    /// `ip4-local`'s counters.
    pub enum Ip4LocalError {
        BadIcmp = drop("bad-icmp", "ICMP message too short or with a bad checksum"),
        Echo = info("echo-reply-sent", "echo requests answered"),
        IcmpOther = drop("icmp-consumed", "ICMP message for the router other than echo request"),
        Tcp = drop("tcp-to-router", "TCP segment for the router (no local service)"),
        Udp = info("udp-port-unreachable", "UDP datagram for the router (ICMP port unreachable)"),
        Proto = info("protocol-unreachable", "other protocol for the router (ICMP protocol unreachable)"),
        Linux = drop("left-to-linux", "for the router in Linux mode: the kernel got its own copy and answers it"),
        Vrrp = drop("vrrp-to-control", "VRRP advertisements handed to the control thread (consumed here)"),
        VrrpFull = drop("vrrp-queue-full", "VRRP advertisements dropped: the control thread's queue was full"),
        IkeToControl = info("ike-to-control", "IKE (UDP 500) handed to the IKE service (standalone mode, [[ike]])"),
        IkeFull = drop("ike-queue-full", "IKE (UDP 500) dropped: the IKE service's queue was full"),
    }
}

tern_engine::edges! {
    /// `ip4-local`'s next nodes.
    pub enum Ip4LocalNext {
        Drop = "drop",
        /// Echo replies.
        Lookup = "ip4-lookup",
        Icmp = "ip4-icmp-error",
        Gre = "gre-input",
        Punt = "linux-punt",
        Esp = "esp-decrypt",
        /// Fragments (see [`crate::reass`]).
        Reass = "ip4-reassembly",
    }
}

impl Node for Ip4Local {
    fn name(&self) -> &'static str {
        "ip4-local"
    }
    fn nexts(&self) -> &'static [&'static str] {
        Ip4LocalNext::NAMES
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        Ip4LocalError::DESCS
    }
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.params.refresh();
        self.sas.refresh();
        let params = self.params.current();
        let sas = self.sas.current();
        let (linux, punt) = (params.linux_owns_local, params.punt_to_tap());
        let mut ike = Ike { rx: (params.ike_local && !linux).then_some(&*self.ike_rx), pushed: false };
        for (o, &p) in next.iter_mut().zip(pkts) {
            *o = local4(cx, p, (linux, punt), sas, &self.control_rx, &mut ike);
        }
        if ike.pushed {
            self.ike_bell.ring();
        }
    }
}

fn local4(
    cx: &mut Cx<'_>,
    p: PktIdx,
    (linux, punt): (bool, bool),
    sas: &tern_ipsec::SaTable,
    control_rx: &crossbeam_queue::ArrayQueue<crate::state::Punted>,
    ike: &mut Ike<'_>,
) -> u16 {
    let (m, d) = cx.pool.pkt_mut(p);
    // ip4-input validated the header against the frame; a packet that
    // comes here without (a bug) is dropped as the engine's
    // `unspecified`, not read out of bounds.
    let Some(mut ip) = d.get_mut(usize::from(m.l3_off)..).and_then(|l3| Ipv4Packet::new_checked(l3).ok()) else {
        return NEXT_DROP;
    };
    let proto = ip.protocol();
    // Fragments are put back together first: all in standalone mode; in
    // Linux mode ESP's and GRE's (tern's), and UDP's where the kernel has
    // its own copy (not through a TAP): ESP in UDP is tern's, the rest
    // left to Linux once whole; the rest being the kernel's.
    if ip.is_fragment()
        && (!linux
            || proto.0 == crate::ipsec::IPPROTO_ESP
            || proto == IpProtocol::GRE
            || (proto == IpProtocol::UDP && !punt))
    {
        return Ip4LocalNext::Reass as u16;
    }
    if !ip.is_fragment()
        && (proto.0 == crate::ipsec::IPPROTO_ESP || crate::ipsec::is_udp_encap_esp(proto, ip.payload(), linux, sas))
    {
        return Ip4LocalNext::Esp as u16;
    }
    if linux && proto != IpProtocol::GRE {
        return if punt { Ip4LocalNext::Punt as u16 } else { cx.drop(p, Ip4LocalError::Linux) };
    }
    match proto {
        IpProtocol::ICMP => {
            let icmp = ip.payload_mut();
            if icmp.len() < 8 || checksum::data(icmp) != 0xffff {
                return cx.drop(p, Ip4LocalError::BadIcmp);
            }
            // 8 bytes: the view's reads are in bounds.
            let mut icmp = Icmpv4Packet::new_unchecked(icmp);
            if icmp.msg_type() != Icmpv4Type::ECHO_REQUEST || icmp.msg_code() != 0 {
                return cx.drop(p, Ip4LocalError::IcmpOther);
            }
            // Echo reply in place: type 8 -> 0, swap addresses, fresh TTL.
            icmp.set_msg_type(Icmpv4Type::ECHO_REPLY);
            icmp.set_checksum(checksum::update(icmp.checksum(), 0x0800, 0x0000));
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            ip.set_src_addr(dst);
            ip.set_dst_addr(src);
            ip.set_ttl(64);
            ip.fill_checksum();
            m.flags |= flags::LOCAL_ORIGIN;
            cx.count(Ip4LocalError::Echo, 1);
            Ip4LocalNext::Lookup as u16
        }
        IpProtocol::TCP => cx.drop(p, Ip4LocalError::Tcp),
        IpProtocol::GRE => Ip4LocalNext::Gre as u16,
        IpProtocol(112) => {
            let (ifindex, packet) = (m.rx_if, ip.into_inner().to_vec());
            if control_rx.push(crate::state::Punted { ifindex, packet }).is_err() {
                return cx.drop(p, Ip4LocalError::VrrpFull);
            }
            cx.drop(p, Ip4LocalError::Vrrp)
        }
        IpProtocol::UDP => {
            // (A UDP header cut short is answered as any UDP.)
            if let Some(rx) = ike.rx
                && ip.payload().get(2..4) == Some(&crate::ike::IKE_PORT.to_be_bytes()[..])
                && let Some(d) =
                    crate::ike::datagram(ip.dst_addr().into(), ip.src_addr().into(), m.rx_if, ip.payload(), 0)
            {
                if rx.push(d).is_err() {
                    return cx.drop(p, Ip4LocalError::IkeFull);
                }
                ike.pushed = true;
                return cx.drop(p, Ip4LocalError::IkeToControl);
            }
            m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_PORT, 0);
            cx.count(Ip4LocalError::Udp, 1);
            Ip4LocalNext::Icmp as u16
        }
        _ => {
            m.aux = icmp_aux(ICMP_DEST_UNREACH, UNREACH_PROTOCOL, 0);
            cx.count(Ip4LocalError::Proto, 1);
            Ip4LocalNext::Icmp as u16
        }
    }
}
