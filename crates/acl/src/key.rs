//! The packet key: the header fields a rule can match, filled by the
//! forwarding node from the packet's headers and metadata.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Defines [`PacketKey`] and, from the same field list, the names of its
/// fields ([`PacketKey::FIELDS`]) and the fields two keys differ in
/// ([`PacketKey::differing_fields`]): a new field is one line here, and the
/// tests of every cached verdict (`crate::verdict`) see it.
macro_rules! packet_key {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* }) => {
        $(#[$m])*
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }

        impl $name {
            /// Every field's name, in declaration order: the one list of
            /// what a key (so a cached verdict, `crate::verdict`) is made of.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($f)),*];

            /// The names of the fields in which `self` and `o` differ.
            pub fn differing_fields(&self, o: &Self) -> Vec<&'static str> {
                let mut v = Vec::new();
                $(if self.$f != o.$f {
                    v.push(stringify!($f));
                })*
                v
            }
        }
    };
}

packet_key! {
/// The fields of one packet the classifier looks at.
///
/// Addresses: an IPv6 address is its 128-bit big-endian value; an IPv4
/// address is its 32-bit value in the low bits with `is_v6 == false` (the
/// high bits are ignored). `proto` is the IPv4 protocol or, for IPv6, the
/// upper-layer protocol found after the extension headers.
///
/// `l4_valid` says the transport header was read (first fragment, long
/// enough). When it is false, or when the protocol has no such field, the
/// port, ICMP and TCP-flag fields are ignored and rules matching on them do
/// not match. Ports are read for TCP, UDP, SCTP, UDP-Lite and DCCP; ICMP
/// type/code for protocols 1 and 58; TCP flags (byte 13 of the TCP header)
/// for protocol 6.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PacketKey {
    pub src: u128,
    pub dst: u128,
    pub is_v6: bool,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    pub icmp_type: u8,
    pub icmp_code: u8,
    pub tcp_flags: u8,
    /// tern interface index the packet arrived on.
    pub in_if: u16,
    /// tern interface index chosen for output (0 in input rule sets).
    pub out_if: u16,
    /// VLAN id (0: untagged).
    pub vlan: u16,
    /// DSCP, the upper 6 bits of the IPv4 TOS / IPv6 traffic class.
    pub dscp: u8,
    pub l4_valid: bool,
}
}

impl PacketKey {
    /// An IPv4 packet of protocol `proto` without transport fields.
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8) -> Self {
        PacketKey { src: u32::from(src) as u128, dst: u32::from(dst) as u128, proto, ..Default::default() }
    }
    /// An IPv6 packet of upper-layer protocol `proto` without transport fields.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr, proto: u8) -> Self {
        PacketKey { src: src.into(), dst: dst.into(), is_v6: true, proto, ..Default::default() }
    }
    /// Sets the ports and marks the transport header valid.
    pub fn with_ports(mut self, sport: u16, dport: u16) -> Self {
        self.sport = sport;
        self.dport = dport;
        self.l4_valid = true;
        self
    }
    /// Sets ICMP type and code and marks the transport header valid.
    pub fn with_icmp(mut self, ty: u8, code: u8) -> Self {
        self.icmp_type = ty;
        self.icmp_code = code;
        self.l4_valid = true;
        self
    }
    /// Sets the TCP flags byte and marks the transport header valid.
    pub fn with_tcp_flags(mut self, flags: u8) -> Self {
        self.tcp_flags = flags;
        self.l4_valid = true;
        self
    }
    /// Sets input and output interface indices.
    pub fn with_ifs(mut self, in_if: u16, out_if: u16) -> Self {
        self.in_if = in_if;
        self.out_if = out_if;
        self
    }

    /// The source address in its family's integer space.
    #[inline(always)]
    pub fn src_bits(&self) -> u128 {
        if self.is_v6 { self.src } else { self.src as u32 as u128 }
    }
    /// The destination address in its family's integer space.
    #[inline(always)]
    pub fn dst_bits(&self) -> u128 {
        if self.is_v6 { self.dst } else { self.dst as u32 as u128 }
    }
    /// Whether `sport`/`dport` are meaningful ([`crate::PORT_PROTOCOLS`]).
    #[inline(always)]
    pub fn has_ports(&self) -> bool {
        self.l4_valid && matches!(self.proto, 6 | 17 | 33 | 132 | 136)
    }
    /// Whether `icmp_type`/`icmp_code` are meaningful.
    #[inline(always)]
    pub fn has_icmp(&self) -> bool {
        self.l4_valid && (self.proto == 1 || self.proto == 58)
    }
    /// Whether `tcp_flags` is meaningful.
    #[inline(always)]
    pub fn has_tcp_flags(&self) -> bool {
        self.l4_valid && self.proto == 6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_fields_follow_protocol_and_validity() {
        let k = PacketKey::v4(Ipv4Addr::new(1, 2, 3, 4), Ipv4Addr::new(5, 6, 7, 8), 17).with_ports(1, 2);
        assert!(k.has_ports() && !k.has_icmp() && !k.has_tcp_flags());
        let frag = PacketKey { l4_valid: false, ..k };
        assert!(!frag.has_ports());
        let icmp = PacketKey::v4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, 1).with_icmp(8, 0);
        assert!(icmp.has_icmp() && !icmp.has_ports());
        let dirty = PacketKey { src: 0xdead_0000_0000_0102_0304, ..k };
        assert_eq!(dirty.src_bits(), 0x0102_0304);
    }

    /// The field list is the struct's, and tells every field apart.
    #[test]
    fn fields_are_the_structs() {
        let names = format!("{:?}", PacketKey::default());
        for f in PacketKey::FIELDS {
            assert!(names.contains(&format!(" {f}: ")), "{f} in {names}");
        }
        assert_eq!(names.matches(": ").count(), PacketKey::FIELDS.len(), "{names}");
        let k = PacketKey::default();
        assert!(k.differing_fields(&k).is_empty());
        let o = PacketKey { vlan: 3, l4_valid: true, ..k };
        assert_eq!(k.differing_fields(&o), ["vlan", "l4_valid"]);
    }
}
