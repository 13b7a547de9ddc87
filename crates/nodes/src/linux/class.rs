//! Control traffic first: the class of a frame for the router itself
//! (what `linux-punt` hands to Linux, what the XDP lane passes to Linux or
//! punts to the engine), so that each class is policed apart and a flood
//! of one (pings or UDP to a closed port at the router's address, ARP)
//! cannot take the place of another (BGP keepalives, OSPF hellos, VRRP
//! advertisements) in the kernel's backlog or a TAP's queue.
//!
//! The same function as the XDP lane's `punt_class` (`crates/xdp/bpf/
//! lib/punt.h`), rule for rule; `crates/xdp/tests/lane_diff.rs` checks
//! that the two agree frame by frame.
//!
//! Example: a TCP segment from port 179 is [`PuntClass::Bgp`]; an ICMP echo
//! request is [`PuntClass::Local`]; an ESP packet is `None` (data, not
//! policed as control).

#![deny(clippy::indexing_slicing)]

/// A class of traffic for the router (see the module), in the XDP lane's
/// order (`bpf/lane.h` PC_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PuntClass {
    /// ARP; ICMPv6 Router/Neighbor Solicitation and Advertisement, Redirect (133-137).
    Neighbor,
    /// TCP port 179 on either side.
    Bgp,
    /// IP protocol 89.
    Ospf,
    /// IP protocol 112.
    Vrrp,
    /// UDP 500; UDP 4500 with the non-ESP marker; NAT keepalives.
    Ike,
    /// UDP to port 3784 (single hop), 3785 (echo), 4784 (multihop).
    Bfd,
    /// Anything else for the router (ping, UDP to a closed port, SSH): the
    /// bulk, policed low.
    Local,
}

impl PuntClass {
    /// Every class, in order.
    pub const ALL: [PuntClass; 7] = [
        PuntClass::Neighbor,
        PuntClass::Bgp,
        PuntClass::Ospf,
        PuntClass::Vrrp,
        PuntClass::Ike,
        PuntClass::Bfd,
        PuntClass::Local,
    ];

    /// The name the configuration (`[dataplane.punt]`) and the counters
    /// (`punt-shed-<name>`) use.
    pub fn name(self) -> &'static str {
        match self {
            PuntClass::Neighbor => "neighbor",
            PuntClass::Bgp => "bgp",
            PuntClass::Ospf => "ospf",
            PuntClass::Vrrp => "vrrp",
            PuntClass::Ike => "ike",
            PuntClass::Bfd => "bfd",
            PuntClass::Local => "local",
        }
    }

    /// Index in [`Self::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

fn rd16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

/// The class of the Ethernet frame `f` (an 802.1Q or 802.1ad tag is
/// looked through); `None` for what is not policed as control or bulk:
/// ESP (IP protocol 50, and ESP in UDP 4500), EtherTypes other than ARP,
/// IPv4 and IPv6 (LLDP, LACP).
pub fn classify(f: &[u8]) -> Option<PuntClass> {
    use PuntClass::*;
    let Some(mut et) = rd16(f, 12) else { return Some(Local) };
    let mut ip = 14;
    if et == 0x8100 || et == 0x88a8 {
        let Some(inner) = rd16(f, 16) else { return Some(Local) };
        et = inner;
        ip = 18;
    }
    let (proto, l4) = match et {
        0x0806 => return Some(Neighbor),
        0x0800 => {
            if f.len() < ip + 20 {
                return Some(Local);
            }
            let proto = f.get(ip + 9).copied().unwrap_or(0);
            let ihl = usize::from(f.get(ip).copied().unwrap_or(0) & 0x0f) * 4;
            // A later fragment has no ports: the bulk's.
            if rd16(f, ip + 6).unwrap_or(0) & 0x1fff != 0 {
                return match proto {
                    89 => Some(Ospf),
                    112 => Some(Vrrp),
                    50 => None,
                    _ => Some(Local),
                };
            }
            if ihl < 20 {
                return Some(Local);
            }
            (proto, ip + ihl)
        }
        0x86dd => {
            if f.len() < ip + 40 {
                return Some(Local);
            }
            (f.get(ip + 6).copied().unwrap_or(0), ip + 40)
        }
        _ => return None,
    };
    match proto {
        89 => return Some(Ospf),
        112 => return Some(Vrrp),
        50 => return None,
        58 => {
            return match f.get(l4) {
                Some(133..=137) => Some(Neighbor),
                _ => Some(Local),
            };
        }
        6 | 17 => {}
        _ => return Some(Local),
    }
    let (Some(sport), Some(dport)) = (rd16(f, l4), rd16(f, l4 + 2)) else { return Some(Local) };
    if proto == 6 {
        return Some(if sport == 179 || dport == 179 { Bgp } else { Local });
    }
    if matches!(dport, 3784 | 3785 | 4784) {
        return Some(Bfd);
    }
    if dport == 500 || sport == 500 {
        return Some(Ike);
    }
    if dport == 4500 || sport == 4500 {
        // RFC 3948: a one-byte 0xff is a NAT keepalive, four zero bytes
        // the non-ESP marker (IKE); anything else is ESP: data.
        if rd16(f, l4 + 4) == Some(9) && f.get(l4 + 8) == Some(&0xff) {
            return Some(Ike);
        }
        let Some(marker) = f.get(l4 + 8..l4 + 12) else { return Some(Local) };
        return if marker == [0, 0, 0, 0] { Some(Ike) } else { None };
    }
    Some(Local)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::PuntClass::*;
    use super::*;

    fn eth(et: u16, l3: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        f.extend_from_slice(&et.to_be_bytes());
        f.extend_from_slice(l3);
        f
    }

    fn v4(proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1];
        let len = (20 + l4.len()) as u16;
        h[2..4].copy_from_slice(&len.to_be_bytes());
        h.extend_from_slice(l4);
        eth(0x0800, &h)
    }

    fn v6(nh: u8, l4: &[u8]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0, 0, 0, nh, 255];
        h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
        h.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(l4);
        eth(0x86dd, &h)
    }

    fn ports(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut l4 = sport.to_be_bytes().to_vec();
        l4.extend_from_slice(&dport.to_be_bytes());
        l4.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
        l4.extend_from_slice(payload);
        l4
    }

    #[test]
    fn control_protocols_have_their_classes() {
        assert_eq!(classify(&eth(0x0806, &[0; 28])), Some(Neighbor));
        assert_eq!(classify(&v4(6, &ports(40000, 179, &[0; 12]))), Some(Bgp));
        assert_eq!(classify(&v4(6, &ports(179, 40000, &[0; 12]))), Some(Bgp));
        assert_eq!(classify(&v6(6, &ports(179, 40000, &[0; 12]))), Some(Bgp));
        assert_eq!(classify(&v4(89, &[2, 1, 0, 44])), Some(Ospf));
        assert_eq!(classify(&v6(89, &[3, 1, 0, 36])), Some(Ospf));
        assert_eq!(classify(&v4(112, &[0x31, 10, 100, 1])), Some(Vrrp));
        assert_eq!(classify(&v6(112, &[0x31, 10, 100, 1])), Some(Vrrp));
        assert_eq!(classify(&v4(17, &ports(500, 500, &[1; 28]))), Some(Ike));
        assert_eq!(classify(&v4(17, &ports(4500, 4500, &[0, 0, 0, 0, 1, 2]))), Some(Ike));
        assert_eq!(classify(&v4(17, &ports(4500, 4500, &[0xff]))), Some(Ike));
        assert_eq!(classify(&v4(17, &ports(49152, 3784, &[0x20; 24]))), Some(Bfd));
        assert_eq!(classify(&v6(17, &ports(49152, 4784, &[0x20; 24]))), Some(Bfd));
        for t in 133..=137u8 {
            assert_eq!(classify(&v6(58, &[t, 0, 0, 0])), Some(Neighbor), "ICMPv6 {t}");
        }
    }

    #[test]
    fn the_bulk_is_local_and_data_is_unclassed() {
        // Ping, ICMPv6 echo, UDP to a closed port, SSH, GRE: the bulk.
        assert_eq!(classify(&v4(1, &[8, 0, 0, 0, 0, 1, 0, 1])), Some(Local));
        assert_eq!(classify(&v6(58, &[128, 0, 0, 0])), Some(Local));
        assert_eq!(classify(&v4(17, &ports(1234, 9, b"flood"))), Some(Local));
        assert_eq!(classify(&v4(6, &ports(40000, 22, &[0; 12]))), Some(Local));
        assert_eq!(classify(&v4(47, &[0; 8])), Some(Local));
        // BFD's port as the source only is not BFD.
        assert_eq!(classify(&v4(17, &ports(3784, 9, b"x"))), Some(Local));
        // ESP and ESP in UDP: data (not policed as control or bulk).
        assert_eq!(classify(&v4(50, &[0, 0, 1, 0, 0, 0, 0, 1])), None);
        assert_eq!(classify(&v4(17, &ports(4500, 4500, &[0, 0, 1, 0, 0, 0, 0, 1]))), None);
        // Non-IP (LLDP): not classed.
        assert_eq!(classify(&eth(0x88cc, &[0; 46])), None);
        // A later IPv4 fragment of UDP 179: no ports, the bulk's.
        let mut frag = v4(6, &ports(40000, 179, &[0; 12]));
        frag[14 + 6] = 0x00;
        frag[14 + 7] = 0x10;
        assert_eq!(classify(&frag), Some(Local));
    }

    #[test]
    fn tags_are_looked_through_and_truncation_is_the_bulks() {
        let mut tagged = v4(89, &[2, 1, 0, 44]);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x64]);
        assert_eq!(classify(&tagged), Some(Ospf));
        let mut qinq_arp = eth(0x0806, &[0; 28]);
        qinq_arp.splice(12..12, [0x88, 0xa8, 0x00, 0x07]);
        assert_eq!(classify(&qinq_arp), Some(Neighbor));
        // Too short for what it claims: never a control class.
        let bgp = v4(6, &ports(40000, 179, &[0; 12]));
        for cut in [0, 10, 13, 14, 20, 33, 35] {
            let c = classify(&bgp[..cut]);
            assert!(c == Some(Local), "cut at {cut}: {c:?}");
        }
        assert_eq!(classify(&v6(58, &[])), Some(Local));
        // IHL below 5 (malformed): the bulk's.
        let mut bad = v4(6, &ports(40000, 179, &[0; 12]));
        bad[14] = 0x44;
        assert_eq!(classify(&bad), Some(Local));
    }
}
