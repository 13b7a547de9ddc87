//! IP protocol numbers (IPv4 "protocol", IPv6 "next header").

use core::fmt;

/// An IP protocol number (IANA "Assigned Internet Protocol Numbers"),
/// as found in the IPv4 protocol field and the IPv6 next-header fields.
///
/// A newtype rather than an enum so that reading it is a plain load and
/// unknown values survive a parse/emit round trip; match on the constants:
/// `match p { IpProtocol::UDP => .., IpProtocol::TCP => .., _ => .. }`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 Hop-by-Hop Options (RFC 8200 4.3).
    pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
    pub const ICMP: IpProtocol = IpProtocol(1);
    pub const IGMP: IpProtocol = IpProtocol(2);
    /// IPv4 encapsulated in IP (RFC 2003).
    pub const IPV4: IpProtocol = IpProtocol(4);
    pub const TCP: IpProtocol = IpProtocol(6);
    pub const UDP: IpProtocol = IpProtocol(17);
    /// IPv6 encapsulated in IP (RFC 2473, RFC 4213).
    pub const IPV6: IpProtocol = IpProtocol(41);
    /// IPv6 Routing header (RFC 8200 4.4).
    pub const IPV6_ROUTE: IpProtocol = IpProtocol(43);
    /// IPv6 Fragment header (RFC 8200 4.5).
    pub const IPV6_FRAG: IpProtocol = IpProtocol(44);
    /// Generic Routing Encapsulation (RFC 2784).
    pub const GRE: IpProtocol = IpProtocol(47);
    /// Encapsulating Security Payload (RFC 4303).
    pub const ESP: IpProtocol = IpProtocol(50);
    /// Authentication Header (RFC 4302).
    pub const AH: IpProtocol = IpProtocol(51);
    pub const ICMPV6: IpProtocol = IpProtocol(58);
    /// IPv6 "No Next Header" (RFC 8200 4.7).
    pub const IPV6_NO_NEXT: IpProtocol = IpProtocol(59);
    /// IPv6 Destination Options (RFC 8200 4.6).
    pub const IPV6_DEST_OPTS: IpProtocol = IpProtocol(60);

    /// Whether this is one of the IPv6 extension headers the walker in
    /// [`crate::ipv6ext`] steps over (hop-by-hop, routing, fragment,
    /// destination options, AH).
    #[inline]
    pub const fn is_ipv6_ext_header(self) -> bool {
        matches!(self.0, 0 | 43 | 44 | 51 | 60)
    }

    fn name(self) -> Option<&'static str> {
        Some(match self {
            IpProtocol::HOP_BY_HOP => "hop-by-hop",
            IpProtocol::ICMP => "icmp",
            IpProtocol::IGMP => "igmp",
            IpProtocol::IPV4 => "ipip",
            IpProtocol::TCP => "tcp",
            IpProtocol::UDP => "udp",
            IpProtocol::IPV6 => "ipv6",
            IpProtocol::IPV6_ROUTE => "ipv6-route",
            IpProtocol::IPV6_FRAG => "ipv6-frag",
            IpProtocol::GRE => "gre",
            IpProtocol::ESP => "esp",
            IpProtocol::AH => "ah",
            IpProtocol::ICMPV6 => "icmpv6",
            IpProtocol::IPV6_NO_NEXT => "ipv6-nonxt",
            IpProtocol::IPV6_DEST_OPTS => "ipv6-opts",
            _ => return None,
        })
    }
}

impl From<u8> for IpProtocol {
    #[inline]
    fn from(value: u8) -> Self {
        IpProtocol(value)
    }
}

impl From<IpProtocol> for u8 {
    #[inline]
    fn from(value: IpProtocol) -> Self {
        value.0
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "proto-{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_known_and_unknown() {
        assert_eq!(IpProtocol::UDP.to_string(), "udp");
        assert_eq!(IpProtocol(200).to_string(), "proto-200");
    }

    #[test]
    fn ext_header_set() {
        for p in [0u8, 43, 44, 51, 60] {
            assert!(IpProtocol(p).is_ipv6_ext_header(), "{p}");
        }
        for p in [6u8, 17, 50, 58, 59] {
            assert!(!IpProtocol(p).is_ipv6_ext_header(), "{p}");
        }
    }
}
