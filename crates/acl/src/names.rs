//! Symbolic names accepted in rules: IP protocols, ICMP/ICMPv6 types and
//! codes, DSCP code points and TCP flags. The spellings follow nftables (so an
//! imported ruleset reads the same) and `/etc/protocols`.

/// IP protocol numbers (IANA "Assigned Internet Protocol Numbers"); the
/// names are those of `/etc/protocols`, plus nftables' `icmpv6`.
pub const PROTOCOLS: &[(&str, u8)] = &[
    ("hopopt", 0),
    ("icmp", 1),
    ("igmp", 2),
    ("ipencap", 4),
    ("ipip", 4),
    ("tcp", 6),
    ("egp", 8),
    ("udp", 17),
    ("dccp", 33),
    ("ipv6", 41),
    ("ipv6-route", 43),
    ("ipv6-frag", 44),
    ("rsvp", 46),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("ipv6-icmp", 58),
    ("ipv6-nonxt", 59),
    ("ipv6-opts", 60),
    ("ospf", 89),
    ("pim", 103),
    ("vrrp", 112),
    ("l2tp", 115),
    ("sctp", 132),
    ("udplite", 136),
    ("mpls-in-ip", 137),
];

/// ICMP (v4) message types, RFC 792 and nftables' `icmp_type` names.
pub const ICMP_TYPES: &[(&str, u8)] = &[
    ("echo-reply", 0),
    ("destination-unreachable", 3),
    ("source-quench", 4),
    ("redirect", 5),
    ("echo-request", 8),
    ("router-advertisement", 9),
    ("router-solicitation", 10),
    ("time-exceeded", 11),
    ("parameter-problem", 12),
    ("timestamp-request", 13),
    ("timestamp-reply", 14),
    ("info-request", 15),
    ("info-reply", 16),
    ("address-mask-request", 17),
    ("address-mask-reply", 18),
];

/// ICMP (v4) destination-unreachable codes, nftables' `icmp_code` names.
pub const ICMP_CODES: &[(&str, u8)] = &[
    ("net-unreachable", 0),
    ("host-unreachable", 1),
    ("prot-unreachable", 2),
    ("port-unreachable", 3),
    ("frag-needed", 4),
    ("net-prohibited", 9),
    ("host-prohibited", 10),
    ("admin-prohibited", 13),
];

/// ICMPv6 message types, RFC 4443 / RFC 4861 and nftables' `icmpv6_type` names.
pub const ICMPV6_TYPES: &[(&str, u8)] = &[
    ("destination-unreachable", 1),
    ("packet-too-big", 2),
    ("time-exceeded", 3),
    ("parameter-problem", 4),
    ("echo-request", 128),
    ("echo-reply", 129),
    ("mld-listener-query", 130),
    ("mld-listener-report", 131),
    ("mld-listener-done", 132),
    ("mld-listener-reduction", 132),
    ("nd-router-solicit", 133),
    ("nd-router-advert", 134),
    ("nd-neighbor-solicit", 135),
    ("nd-neighbor-advert", 136),
    ("nd-redirect", 137),
    ("router-renumbering", 138),
    ("ind-neighbor-solicit", 141),
    ("ind-neighbor-advert", 142),
    ("mld2-listener-report", 143),
];

/// ICMPv6 destination-unreachable codes, nftables' `icmpv6_code` names.
pub const ICMPV6_CODES: &[(&str, u8)] = &[
    ("no-route", 0),
    ("admin-prohibited", 1),
    ("addr-unreachable", 3),
    ("port-unreachable", 4),
    ("policy-fail", 5),
    ("reject-route", 6),
];

/// DSCP code points (RFC 2474 class selectors, RFC 2597 AF, RFC 3246 EF,
/// RFC 8622 LE, RFC 5865 VA).
pub const DSCP: &[(&str, u8)] = &[
    ("cs0", 0),
    ("be", 0),
    ("df", 0),
    ("le", 1),
    ("cs1", 8),
    ("af11", 10),
    ("af12", 12),
    ("af13", 14),
    ("cs2", 16),
    ("af21", 18),
    ("af22", 20),
    ("af23", 22),
    ("cs3", 24),
    ("af31", 26),
    ("af32", 28),
    ("af33", 30),
    ("cs4", 32),
    ("af41", 34),
    ("af42", 36),
    ("af43", 38),
    ("cs5", 40),
    ("va", 44),
    ("ef", 46),
    ("cs6", 48),
    ("cs7", 56),
];

/// TCP header flag bits (byte 13 of the TCP header, RFC 9293 section 3.1,
/// RFC 3168 for ECE/CWR).
pub const TCP_FLAGS: &[(&str, u8)] = &[
    ("fin", 0x01),
    ("syn", 0x02),
    ("rst", 0x04),
    ("psh", 0x08),
    ("ack", 0x10),
    ("urg", 0x20),
    ("ece", 0x40),
    ("cwr", 0x80),
];

/// Looks a name up (case-insensitive).
pub fn lookup(table: &[(&str, u8)], name: &str) -> Option<u8> {
    table.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, v)| v)
}

/// The first (canonical) name of a value, if it has one.
pub fn name_of(table: &'static [(&'static str, u8)], value: u8) -> Option<&'static str> {
    table.iter().find(|&&(_, v)| v == value).map(|&(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_are_case_insensitive_and_canonical() {
        assert_eq!(lookup(PROTOCOLS, "TCP"), Some(6));
        assert_eq!(lookup(PROTOCOLS, "ipv6-icmp"), Some(58));
        assert_eq!(name_of(PROTOCOLS, 58), Some("icmpv6"));
        assert_eq!(lookup(ICMP_TYPES, "echo-request"), Some(8));
        assert_eq!(lookup(ICMPV6_TYPES, "echo-request"), Some(128));
        assert_eq!(lookup(DSCP, "ef"), Some(46));
        assert_eq!(lookup(TCP_FLAGS, "ack"), Some(0x10));
        assert_eq!(lookup(PROTOCOLS, "nope"), None);
    }
}
