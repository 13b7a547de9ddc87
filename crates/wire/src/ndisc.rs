//! IPv6 Neighbour Discovery (RFC 4861): router solicitation and
//! advertisement, neighbour solicitation and advertisement, redirect, and
//! their options (source/target link-layer address, prefix information,
//! redirected header, MTU).
//!
//! ND messages are ICMPv6 messages: [`NdiscRepr`] reads and writes them
//! through an [`Icmpv6Packet`], whose `check_len` already guarantees the
//! fixed part of each type. Options are walked with a bound
//! ([`MAX_ND_OPTIONS`]) and a zero length is an error (RFC 4861 section 4.6:
//! "Nodes MUST silently discard an ND packet that contains an option with
//! length zero").
//!
//! What needs the IPv6 header (hop limit 255, the unspecified-source rules
//! of RFC 4861 sections 6.1 and 7.1) is left to the caller.

use crate::ethernet::EthernetAddress;
use crate::field::{get_array, write_u16, write_u32};
use crate::icmpv6::{Icmpv6Packet, Icmpv6Type};
use crate::{Error, Result};
use core::net::Ipv6Addr;

/// Most options [`NdOptions`] yields before failing with
/// [`Error::Unsupported`]. A 1500-byte router advertisement has room for at
/// most 180 eight-byte options; real ones carry a handful (link-layer
/// address, MTU, a few prefixes, RDNSS).
pub const MAX_ND_OPTIONS: usize = 64;

/// Flags of a router advertisement (RFC 4861 section 4.2, RFC 4191).
pub mod ra_flags {
    /// Managed address configuration (DHCPv6 for addresses).
    pub const MANAGED: u8 = 0x80;
    /// Other configuration (DHCPv6 for other information).
    pub const OTHER: u8 = 0x40;
    /// Default router preference, 2 bits (RFC 4191 section 2.2).
    pub const PREFERENCE_MASK: u8 = 0x18;
}

/// Option types (RFC 4861 section 4.6, IANA "IPv6 ND Option Formats").
pub mod option_type {
    pub const SOURCE_LL_ADDR: u8 = 1;
    pub const TARGET_LL_ADDR: u8 = 2;
    pub const PREFIX_INFO: u8 = 3;
    pub const REDIRECTED_HEADER: u8 = 4;
    pub const MTU: u8 = 5;
}

/// A prefix information option (RFC 4861 section 4.6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PrefixInfo {
    pub prefix_len: u8,
    /// L flag: the prefix is on-link.
    pub on_link: bool,
    /// A flag: usable for stateless address autoconfiguration.
    pub autonomous: bool,
    /// Seconds; 0xffffffff is infinity.
    pub valid_lifetime: u32,
    /// Seconds; 0xffffffff is infinity.
    pub preferred_lifetime: u32,
    pub prefix: Ipv6Addr,
}

/// One ND option.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NdOption<'a> {
    SourceLinkLayerAddr(EthernetAddress),
    TargetLinkLayerAddr(EthernetAddress),
    PrefixInformation(PrefixInfo),
    /// The redirected packet, as much as fits (RFC 4861 section 4.6.3);
    /// includes any trailing zero padding.
    RedirectedHeader(&'a [u8]),
    Mtu(u32),
    /// An option tern does not interpret (RFC 4861: "silently ignore").
    /// `data` is everything after the type and length bytes.
    Unknown {
        option_type: u8,
        data: &'a [u8],
    },
}

impl<'a> NdOption<'a> {
    /// Bytes this option takes on the wire (a multiple of 8).
    pub fn buffer_len(&self) -> usize {
        match self {
            NdOption::SourceLinkLayerAddr(_) | NdOption::TargetLinkLayerAddr(_) | NdOption::Mtu(_) => 8,
            NdOption::PrefixInformation(_) => 32,
            NdOption::RedirectedHeader(data) => (8 + data.len()).next_multiple_of(8),
            NdOption::Unknown { data, .. } => (2 + data.len()).next_multiple_of(8),
        }
    }

    /// Writes the option at the start of `buf`, zero-padded to a multiple
    /// of 8, and returns its length. [`Error::Truncated`] if `buf` is too
    /// short, [`Error::Malformed`] if the option is longer than the 8-bit
    /// length field can say (2040 bytes).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if len > 255 * 8 {
            return Err(Error::Malformed);
        }
        let out = buf.get_mut(..len).ok_or(Error::Truncated)?;
        out.fill(0);
        out[1] = (len / 8) as u8;
        match *self {
            NdOption::SourceLinkLayerAddr(mac) => {
                out[0] = option_type::SOURCE_LL_ADDR;
                out[2..8].copy_from_slice(&mac.0);
            }
            NdOption::TargetLinkLayerAddr(mac) => {
                out[0] = option_type::TARGET_LL_ADDR;
                out[2..8].copy_from_slice(&mac.0);
            }
            NdOption::PrefixInformation(p) => {
                out[0] = option_type::PREFIX_INFO;
                out[2] = p.prefix_len;
                out[3] = if p.on_link { 0x80 } else { 0 } | if p.autonomous { 0x40 } else { 0 };
                write_u32(out, 4, p.valid_lifetime);
                write_u32(out, 8, p.preferred_lifetime);
                out[16..32].copy_from_slice(&p.prefix.octets());
            }
            NdOption::RedirectedHeader(data) => {
                out[0] = option_type::REDIRECTED_HEADER;
                out[8..8 + data.len()].copy_from_slice(data);
            }
            NdOption::Mtu(mtu) => {
                out[0] = option_type::MTU;
                write_u32(out, 4, mtu);
            }
            NdOption::Unknown { option_type, data } => {
                out[0] = option_type;
                out[2..2 + data.len()].copy_from_slice(data);
            }
        }
        Ok(len)
    }

    /// Reads one option from a whole `(type, len, body)` slice whose
    /// length the iterator has checked.
    fn parse(option: &'a [u8]) -> Result<NdOption<'a>> {
        let (&kind, rest) = option.split_first().ok_or(Error::Truncated)?;
        let units = option.len() / 8;
        let lladdr = || -> Result<EthernetAddress> {
            // RFC 2464 section 6: on Ethernet the option is 8 bytes.
            if units != 1 {
                return Err(Error::Malformed);
            }
            get_array(option, 2).map(EthernetAddress).ok_or(Error::Truncated)
        };
        Ok(match kind {
            option_type::SOURCE_LL_ADDR => NdOption::SourceLinkLayerAddr(lladdr()?),
            option_type::TARGET_LL_ADDR => NdOption::TargetLinkLayerAddr(lladdr()?),
            option_type::PREFIX_INFO => {
                // RFC 4861 section 4.6.2: length 4.
                if units != 4 {
                    return Err(Error::Malformed);
                }
                let flags = option.get(3).copied().ok_or(Error::Truncated)?;
                NdOption::PrefixInformation(PrefixInfo {
                    prefix_len: option.get(2).copied().ok_or(Error::Truncated)?,
                    on_link: flags & 0x80 != 0,
                    autonomous: flags & 0x40 != 0,
                    valid_lifetime: get_array(option, 4).map(u32::from_be_bytes).ok_or(Error::Truncated)?,
                    preferred_lifetime: get_array(option, 8).map(u32::from_be_bytes).ok_or(Error::Truncated)?,
                    prefix: get_array::<16>(option, 16).map(Ipv6Addr::from).ok_or(Error::Truncated)?,
                })
            }
            option_type::REDIRECTED_HEADER => NdOption::RedirectedHeader(option.get(8..).ok_or(Error::Truncated)?),
            option_type::MTU => {
                // RFC 4861 section 4.6.4: length 1.
                if units != 1 {
                    return Err(Error::Malformed);
                }
                NdOption::Mtu(get_array(option, 4).map(u32::from_be_bytes).ok_or(Error::Truncated)?)
            }
            option_type => NdOption::Unknown { option_type, data: rest.get(1..).ok_or(Error::Truncated)? },
        })
    }
}

/// Iterator over the options area of an ND message.
///
/// Yields `Err(Malformed)` for a zero-length option, `Err(Truncated)` for
/// an option that runs past the end, `Err(Unsupported)` after
/// [`MAX_ND_OPTIONS`]; after an error it yields nothing more.
#[derive(Clone, Debug)]
pub struct NdOptions<'a> {
    data: &'a [u8],
    count: usize,
}

impl<'a> NdOptions<'a> {
    pub fn new(data: &'a [u8]) -> NdOptions<'a> {
        NdOptions { data, count: 0 }
    }

    /// Walks all options and fails on the first bad one.
    pub fn validate(data: &'a [u8]) -> Result<()> {
        for option in NdOptions::new(data) {
            option?;
        }
        Ok(())
    }

    fn fail(&mut self, e: Error) -> Option<Result<NdOption<'a>>> {
        self.data = &[];
        Some(Err(e))
    }
}

impl<'a> Iterator for NdOptions<'a> {
    type Item = Result<NdOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        if self.count >= MAX_ND_OPTIONS {
            return self.fail(Error::Unsupported);
        }
        self.count += 1;
        let Some(&units) = self.data.get(1) else {
            return self.fail(Error::Truncated);
        };
        if units == 0 {
            return self.fail(Error::Malformed);
        }
        let len = usize::from(units) * 8;
        let Some((option, rest)) = self.data.split_at_checked(len) else {
            return self.fail(Error::Truncated);
        };
        self.data = rest;
        match NdOption::parse(option) {
            Ok(o) => Some(Ok(o)),
            Err(e) => self.fail(e),
        }
    }
}

/// Flags of a neighbour advertisement (RFC 4861 section 4.4).
mod na_flags {
    pub const ROUTER: u8 = 0x80;
    pub const SOLICITED: u8 = 0x40;
    pub const OVERRIDE: u8 = 0x20;
}

/// A Neighbour Discovery message.
///
/// Solicitations and neighbour advertisements keep the one option tern
/// needs (the link-layer address) and skip the others; router
/// advertisements and redirects keep their options area raw, validated,
/// for the caller to walk with [`NdOptions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NdiscRepr<'a> {
    RouterSolicit {
        /// Source link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    RouterAdvert {
        /// Cur hop limit (0: unspecified).
        hop_limit: u8,
        /// See [`ra_flags`].
        flags: u8,
        /// Seconds; 0 means "not a default router".
        router_lifetime: u16,
        /// Milliseconds.
        reachable_time: u32,
        /// Milliseconds.
        retrans_time: u32,
        /// Options area, raw (a multiple of 8 bytes when valid).
        options: &'a [u8],
    },
    NeighborSolicit {
        target_addr: Ipv6Addr,
        /// Source link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    NeighborAdvert {
        router: bool,
        solicited: bool,
        override_: bool,
        target_addr: Ipv6Addr,
        /// Target link-layer address option.
        lladdr: Option<EthernetAddress>,
    },
    Redirect {
        target_addr: Ipv6Addr,
        dest_addr: Ipv6Addr,
        /// Options area, raw (target link-layer address, redirected header).
        options: &'a [u8],
    },
}

mod field {
    pub const RS_OPTIONS: usize = 8;
    pub const RA_HOP_LIMIT: usize = 4;
    pub const RA_FLAGS: usize = 5;
    pub const RA_LIFETIME: usize = 6;
    pub const RA_REACHABLE: usize = 8;
    pub const RA_RETRANS: usize = 12;
    pub const RA_OPTIONS: usize = 16;
    pub const NA_FLAGS: usize = 4;
    pub const TARGET: usize = 8;
    pub const NS_OPTIONS: usize = 24;
    pub const REDIRECT_DEST: usize = 24;
    pub const REDIRECT_OPTIONS: usize = 40;
}

fn addr_at(buf: &[u8], at: usize) -> Result<Ipv6Addr> {
    get_array::<16>(buf, at).map(Ipv6Addr::from).ok_or(Error::Truncated)
}

/// The first link-layer address option of `kind` in `options`, after
/// checking that every option is well formed.
fn find_lladdr(options: &[u8], kind: u8) -> Result<Option<EthernetAddress>> {
    let mut found = None;
    for option in NdOptions::new(options) {
        match (option?, kind) {
            (NdOption::SourceLinkLayerAddr(mac), option_type::SOURCE_LL_ADDR)
            | (NdOption::TargetLinkLayerAddr(mac), option_type::TARGET_LL_ADDR) => {
                found = found.or(Some(mac));
            }
            _ => {}
        }
    }
    Ok(found)
}

impl<'a> NdiscRepr<'a> {
    /// Reads an ND message out of a checked or unchecked ICMPv6 view (the
    /// checksum is [`crate::Icmpv6Repr::parse`]'s business).
    ///
    /// [`Error::Unsupported`] if the type is not an ND type;
    /// [`Error::Malformed`] for a non-zero code (RFC 4861 sections 6.1.1,
    /// 6.1.2, 7.1.1, 7.1.2, 8.1: "ICMP Code is 0"), a multicast target or
    /// redirect destination (sections 7.1.1, 7.1.2, 8.1) or a bad option;
    /// [`Error::Truncated`] if the message is shorter than its fixed part
    /// or an option runs past the end.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Icmpv6Packet<&'a T>) -> Result<NdiscRepr<'a>> {
        packet.check_len()?;
        let msg_type = packet.msg_type();
        if !msg_type.is_ndisc() {
            return Err(Error::Unsupported);
        }
        if packet.msg_code() != 0 {
            return Err(Error::Malformed);
        }
        let buf: &'a [u8] = packet.buffer_ref();
        let options_at = |at: usize| buf.get(at..).ok_or(Error::Truncated);
        Ok(match msg_type {
            Icmpv6Type::ROUTER_SOLICIT => NdiscRepr::RouterSolicit {
                lladdr: find_lladdr(options_at(field::RS_OPTIONS)?, option_type::SOURCE_LL_ADDR)?,
            },
            Icmpv6Type::ROUTER_ADVERT => {
                let options = options_at(field::RA_OPTIONS)?;
                NdOptions::validate(options)?;
                NdiscRepr::RouterAdvert {
                    hop_limit: *buf.get(field::RA_HOP_LIMIT).ok_or(Error::Truncated)?,
                    flags: *buf.get(field::RA_FLAGS).ok_or(Error::Truncated)?,
                    router_lifetime: get_array(buf, field::RA_LIFETIME)
                        .map(u16::from_be_bytes)
                        .ok_or(Error::Truncated)?,
                    reachable_time: get_array(buf, field::RA_REACHABLE)
                        .map(u32::from_be_bytes)
                        .ok_or(Error::Truncated)?,
                    retrans_time: get_array(buf, field::RA_RETRANS).map(u32::from_be_bytes).ok_or(Error::Truncated)?,
                    options,
                }
            }
            Icmpv6Type::NEIGHBOR_SOLICIT => {
                let target_addr = addr_at(buf, field::TARGET)?;
                if target_addr.is_multicast() {
                    return Err(Error::Malformed);
                }
                NdiscRepr::NeighborSolicit {
                    target_addr,
                    lladdr: find_lladdr(options_at(field::NS_OPTIONS)?, option_type::SOURCE_LL_ADDR)?,
                }
            }
            Icmpv6Type::NEIGHBOR_ADVERT => {
                let target_addr = addr_at(buf, field::TARGET)?;
                if target_addr.is_multicast() {
                    return Err(Error::Malformed);
                }
                let flags = *buf.get(field::NA_FLAGS).ok_or(Error::Truncated)?;
                NdiscRepr::NeighborAdvert {
                    router: flags & na_flags::ROUTER != 0,
                    solicited: flags & na_flags::SOLICITED != 0,
                    override_: flags & na_flags::OVERRIDE != 0,
                    target_addr,
                    lladdr: find_lladdr(options_at(field::NS_OPTIONS)?, option_type::TARGET_LL_ADDR)?,
                }
            }
            _ => {
                let dest_addr = addr_at(buf, field::REDIRECT_DEST)?;
                if dest_addr.is_multicast() {
                    return Err(Error::Malformed);
                }
                let options = options_at(field::REDIRECT_OPTIONS)?;
                NdOptions::validate(options)?;
                NdiscRepr::Redirect { target_addr: addr_at(buf, field::TARGET)?, dest_addr, options }
            }
        })
    }

    fn msg_type(&self) -> Icmpv6Type {
        match self {
            NdiscRepr::RouterSolicit { .. } => Icmpv6Type::ROUTER_SOLICIT,
            NdiscRepr::RouterAdvert { .. } => Icmpv6Type::ROUTER_ADVERT,
            NdiscRepr::NeighborSolicit { .. } => Icmpv6Type::NEIGHBOR_SOLICIT,
            NdiscRepr::NeighborAdvert { .. } => Icmpv6Type::NEIGHBOR_ADVERT,
            NdiscRepr::Redirect { .. } => Icmpv6Type::REDIRECT,
        }
    }

    /// Length of the whole ICMPv6 message.
    pub fn buffer_len(&self) -> usize {
        let fixed = self.msg_type().header_len();
        match self {
            NdiscRepr::RouterSolicit { lladdr }
            | NdiscRepr::NeighborSolicit { lladdr, .. }
            | NdiscRepr::NeighborAdvert { lladdr, .. } => fixed + if lladdr.is_some() { 8 } else { 0 },
            NdiscRepr::RouterAdvert { options, .. } | NdiscRepr::Redirect { options, .. } => fixed + options.len(),
        }
    }

    /// Writes the message into an ICMPv6 view, all but the checksum (which
    /// needs the addresses: use [`crate::Icmpv6Repr::emit`], or call
    /// [`Icmpv6Packet::fill_checksum`] after this).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>) -> Result<()> {
        let len = self.buffer_len();
        let buf = packet.buffer_mut().get_mut(..len).ok_or(Error::Truncated)?;
        let msg_type = self.msg_type();
        buf[..msg_type.header_len()].fill(0);
        buf[0] = msg_type.0;
        let fixed = msg_type.header_len();
        match *self {
            NdiscRepr::RouterSolicit { lladdr } => {
                if let Some(mac) = lladdr {
                    NdOption::SourceLinkLayerAddr(mac).emit(&mut buf[fixed..])?;
                }
            }
            NdiscRepr::RouterAdvert { hop_limit, flags, router_lifetime, reachable_time, retrans_time, options } => {
                buf[field::RA_HOP_LIMIT] = hop_limit;
                buf[field::RA_FLAGS] = flags;
                write_u16(buf, field::RA_LIFETIME, router_lifetime);
                write_u32(buf, field::RA_REACHABLE, reachable_time);
                write_u32(buf, field::RA_RETRANS, retrans_time);
                buf[fixed..].copy_from_slice(options);
            }
            NdiscRepr::NeighborSolicit { target_addr, lladdr } => {
                buf[field::TARGET..field::TARGET + 16].copy_from_slice(&target_addr.octets());
                if let Some(mac) = lladdr {
                    NdOption::SourceLinkLayerAddr(mac).emit(&mut buf[fixed..])?;
                }
            }
            NdiscRepr::NeighborAdvert { router, solicited, override_, target_addr, lladdr } => {
                buf[field::NA_FLAGS] = if router { na_flags::ROUTER } else { 0 }
                    | if solicited { na_flags::SOLICITED } else { 0 }
                    | if override_ { na_flags::OVERRIDE } else { 0 };
                buf[field::TARGET..field::TARGET + 16].copy_from_slice(&target_addr.octets());
                if let Some(mac) = lladdr {
                    NdOption::TargetLinkLayerAddr(mac).emit(&mut buf[fixed..])?;
                }
            }
            NdiscRepr::Redirect { target_addr, dest_addr, options } => {
                buf[field::TARGET..field::TARGET + 16].copy_from_slice(&target_addr.octets());
                buf[field::REDIRECT_DEST..field::REDIRECT_DEST + 16].copy_from_slice(&dest_addr.octets());
                buf[fixed..].copy_from_slice(options);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChecksumMode;
    use crate::icmpv6::Icmpv6Repr;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// NS for 2001:db8::1 from fe80::5054:ff:fe12:3456 to ff02::1:ff00:1
    /// with a source link-layer address option 52:54:00:12:34:56.
    const NS: [u8; 32] = [
        0x87, 0x00, 0x42, 0xea, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56,
    ];
    const NS_SRC: &str = "fe80::5054:ff:fe12:3456";
    const NS_DST: &str = "ff02::1:ff00:1";

    /// RA from fe80::1 to ff02::1: hop limit 64, O flag, lifetime 1800,
    /// options SLLA 02:00:00:00:00:01, MTU 1500, prefix 2001:db8:1::/64 LA.
    const RA: [u8; 64] = [
        0x86, 0x00, 0xed, 0xa0, 0x40, 0x48, 0x07, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01,
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x00, 0x00, 0x00, 0x00, 0x05, 0xdc, 0x03, 0x04, 0x40, 0xc0,
        0x00, 0x27, 0x8d, 0x00, 0x00, 0x09, 0x3a, 0x80, 0x00, 0x00, 0x00, 0x00, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parse_ns_with_source_lladdr() {
        let p = Icmpv6Packet::new_checked(&NS[..]).unwrap();
        assert!(p.verify_checksum(a(NS_SRC), a(NS_DST)));
        let repr = Icmpv6Repr::parse(&p, a(NS_SRC), a(NS_DST), ChecksumMode::Verify).unwrap();
        let expected = NdiscRepr::NeighborSolicit {
            target_addr: a("2001:db8::1"),
            lladdr: Some(EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56])),
        };
        assert_eq!(repr, Icmpv6Repr::Ndisc(expected));
        let mut buf = [0xffu8; 32];
        Icmpv6Repr::Ndisc(expected).emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), a(NS_SRC), a(NS_DST)).unwrap();
        assert_eq!(buf, NS);
    }

    #[test]
    fn parse_ra_and_walk_options() {
        let (src, dst) = (a("fe80::1"), a("ff02::1"));
        let p = Icmpv6Packet::new_checked(&RA[..]).unwrap();
        let repr = Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify).unwrap();
        let Icmpv6Repr::Ndisc(NdiscRepr::RouterAdvert {
            hop_limit,
            flags,
            router_lifetime,
            reachable_time,
            retrans_time,
            options,
        }) = repr
        else {
            panic!("not an RA: {repr:?}");
        };
        assert_eq!((hop_limit, flags, router_lifetime), (64, ra_flags::OTHER | 0x08, 1800));
        assert_eq!((reachable_time, retrans_time), (0, 0));
        let opts: Vec<_> = NdOptions::new(options).collect();
        assert_eq!(
            opts,
            vec![
                Ok(NdOption::SourceLinkLayerAddr(EthernetAddress([2, 0, 0, 0, 0, 1]))),
                Ok(NdOption::Mtu(1500)),
                Ok(NdOption::PrefixInformation(PrefixInfo {
                    prefix_len: 64,
                    on_link: true,
                    autonomous: true,
                    valid_lifetime: 2_592_000,
                    preferred_lifetime: 604_800,
                    prefix: a("2001:db8:1::"),
                })),
            ]
        );
        // Re-emitting the options one by one gives the same bytes.
        let mut again = [0u8; 48];
        let mut at = 0;
        for o in &opts {
            at += o.as_ref().unwrap().emit(&mut again[at..]).unwrap();
        }
        assert_eq!(&again[..at], options);
        let mut buf = [0u8; 64];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst).unwrap();
        assert_eq!(buf, RA);
    }

    #[test]
    fn zero_length_option_is_rejected() {
        // RFC 4861 section 4.6.
        let mut b = NS;
        b[25] = 0;
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(NdiscRepr::parse(&p), Err(Error::Malformed));
        assert_eq!(NdOptions::validate(&[1, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
    }

    #[test]
    fn option_errors() {
        // Runs past the end.
        assert_eq!(NdOptions::validate(&[1, 2, 0, 0, 0, 0, 0, 0]), Err(Error::Truncated));
        assert_eq!(NdOptions::validate(&[1]), Err(Error::Truncated));
        // Fixed-length options with the wrong length.
        assert_eq!(NdOptions::validate(&[5, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        assert_eq!(NdOptions::validate(&[3, 1, 64, 0xc0, 0, 0, 0, 0]), Err(Error::Malformed));
        assert_eq!(NdOptions::validate(&[1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(Error::Malformed));
        // Bound on the number of options.
        let many = vec![[99u8, 1, 0, 0, 0, 0, 0, 0]; MAX_ND_OPTIONS + 1].concat();
        assert_eq!(NdOptions::validate(&many), Err(Error::Unsupported));
        assert_eq!(NdOptions::validate(&many[8..]), Ok(()));
        // After an error the iterator is exhausted.
        let mut it = NdOptions::new(&[1, 0, 1, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(it.next(), Some(Err(Error::Malformed)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn unknown_options_are_skipped_in_ns() {
        let mut b = NS.to_vec();
        b.extend_from_slice(&[14, 1, 1, 2, 3, 4, 5, 6]); // nonce option
        let p = Icmpv6Packet::new_checked(&b[..]).unwrap();
        assert!(matches!(NdiscRepr::parse(&p), Ok(NdiscRepr::NeighborSolicit { lladdr: Some(_), .. })));
        let opts: Vec<_> = NdOptions::new(&b[24..]).collect();
        assert_eq!(opts[1], Ok(NdOption::Unknown { option_type: 14, data: &[1, 2, 3, 4, 5, 6] }));
    }

    #[test]
    fn message_checks() {
        let mut b = NS;
        b[1] = 1;
        assert_eq!(NdiscRepr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap()), Err(Error::Malformed));
        let mut b = NS;
        b[8] = 0xff; // multicast target
        assert_eq!(NdiscRepr::parse(&Icmpv6Packet::new_checked(&b[..]).unwrap()), Err(Error::Malformed));
        let echo = [128u8, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(NdiscRepr::parse(&Icmpv6Packet::new_checked(&echo[..]).unwrap()), Err(Error::Unsupported));
    }

    #[test]
    fn round_trip_other_messages() {
        let (src, dst) = (a("fe80::1"), a("fe80::2"));
        let redirected = [0x60u8; 16];
        let mut opts = [0u8; 32];
        let n = NdOption::TargetLinkLayerAddr(EthernetAddress([2, 0, 0, 0, 0, 9])).emit(&mut opts).unwrap();
        let m = NdOption::RedirectedHeader(&redirected).emit(&mut opts[n..]).unwrap();
        for repr in [
            NdiscRepr::RouterSolicit { lladdr: None },
            NdiscRepr::RouterSolicit { lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 7])) },
            NdiscRepr::NeighborAdvert {
                router: true,
                solicited: true,
                override_: false,
                target_addr: a("2001:db8::5"),
                lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 5])),
            },
            NdiscRepr::Redirect { target_addr: a("fe80::9"), dest_addr: a("2001:db8::99"), options: &opts[..n + m] },
        ] {
            let mut buf = vec![0u8; repr.buffer_len()];
            Icmpv6Repr::Ndisc(repr).emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst).unwrap();
            let p = Icmpv6Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(Icmpv6Repr::parse(&p, src, dst, ChecksumMode::Verify), Ok(Icmpv6Repr::Ndisc(repr)));
        }
    }
}
