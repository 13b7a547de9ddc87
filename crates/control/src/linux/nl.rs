//! rtnetlink messages as zero-copy views (smoltcp style): the framing
//! (`nlmsghdr`, RFC 3549 section 2.3.2), attributes (`rtattr`), and the
//! five message families tern mirrors: links, addresses, neighbours,
//! routes and next-hop objects. The same bytes arrive from the kernel's
//! netlink socket and, wrapped in an FPM header, from FRR's zebra.
//!
//! Panic rules: nothing here indexes without a bounds check; every length
//! a message claims is checked against the bytes present, and a view that
//! does not fit is a [`WireError`], never a panic (fuzzed by
//! `crates/control/fuzz/fuzz_targets/fpm_decode.rs`).
//!
//! Byte order: netlink headers and attributes are in host order (the
//! kernel's, and zebra's when it talks FPM on the same host); addresses
//! are in network order.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const AF_INET: u8 = 2;
pub const AF_INET6: u8 = 10;

pub const NLMSG_NOOP: u16 = 1;
pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLMSG_OVERRUN: u16 = 4;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_MULTI: u16 = 0x2;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_DUMP_INTR: u16 = 0x10;
pub const NLM_F_DUMP: u16 = 0x300;
pub const NLM_F_REPLACE: u16 = 0x100;
pub const NLM_F_EXCL: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;

pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_GETLINK: u16 = 18;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_DELADDR: u16 = 21;
pub const RTM_GETADDR: u16 = 22;
pub const RTM_NEWROUTE: u16 = 24;
pub const RTM_DELROUTE: u16 = 25;
pub const RTM_GETROUTE: u16 = 26;
pub const RTM_NEWNEIGH: u16 = 28;
pub const RTM_DELNEIGH: u16 = 29;
pub const RTM_GETNEIGH: u16 = 30;
pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;
pub const RTM_GETNEXTHOP: u16 = 106;

/// Legacy multicast group bits for `bind` (groups 1..=32).
pub const RTMGRP_LINK: u32 = 0x1;
pub const RTMGRP_NEIGH: u32 = 0x4;
pub const RTMGRP_IPV4_IFADDR: u32 = 0x10;
pub const RTMGRP_IPV4_ROUTE: u32 = 0x40;
pub const RTMGRP_IPV6_IFADDR: u32 = 0x100;
pub const RTMGRP_IPV6_ROUTE: u32 = 0x400;
/// RTNLGRP_NEXTHOP (32) as a bind bit.
pub const RTMGRP_NEXTHOP: u32 = 1 << 31;

pub const RTA_DST: u16 = 1;
pub const RTA_OIF: u16 = 4;
pub const RTA_GATEWAY: u16 = 5;
pub const RTA_PRIORITY: u16 = 6;
pub const RTA_PREFSRC: u16 = 7;
pub const RTA_MULTIPATH: u16 = 9;
pub const RTA_TABLE: u16 = 15;
pub const RTA_VIA: u16 = 18;
pub const RTA_NH_ID: u16 = 30;

pub const RTN_UNSPEC: u8 = 0;
pub const RTN_UNICAST: u8 = 1;
pub const RTN_LOCAL: u8 = 2;
pub const RTN_BROADCAST: u8 = 3;
pub const RTN_BLACKHOLE: u8 = 6;
pub const RTN_UNREACHABLE: u8 = 7;
pub const RTN_PROHIBIT: u8 = 8;

pub const RTPROT_KERNEL: u8 = 2;
pub const RTPROT_BOOT: u8 = 3;
pub const RTPROT_STATIC: u8 = 4;
pub const RTM_F_CLONED: u32 = 0x200;
pub const RT_TABLE_MAIN: u32 = 254;
pub const RT_TABLE_LOCAL: u32 = 255;

pub const RTNH_F_DEAD: u8 = 1;
pub const RTNH_F_ONLINK: u8 = 4;
pub const RTNH_F_LINKDOWN: u8 = 16;

pub const NHA_ID: u16 = 1;
pub const NHA_GROUP: u16 = 2;
pub const NHA_BLACKHOLE: u16 = 4;
pub const NHA_OIF: u16 = 5;
pub const NHA_GATEWAY: u16 = 6;

pub const IFLA_ADDRESS: u16 = 1;
pub const IFLA_IFNAME: u16 = 3;
pub const IFLA_MTU: u16 = 4;
pub const IFLA_LINK: u16 = 5;
pub const IFLA_LINKINFO: u16 = 18;
pub const IFLA_INFO_KIND: u16 = 1;
pub const IFLA_PROTO_DOWN: u16 = 39;
pub const IFF_UP: u32 = 0x1;
pub const IFF_LOWER_UP: u32 = 0x1_0000;

pub const IFA_ADDRESS: u16 = 1;
pub const IFA_LOCAL: u16 = 2;
pub const IFA_FLAGS: u16 = 8;
pub const IFA_F_DADFAILED: u32 = 0x8;
pub const IFA_F_TENTATIVE: u32 = 0x40;

pub const NDA_DST: u16 = 1;
pub const NDA_LLADDR: u16 = 2;
pub const NUD_INCOMPLETE: u16 = 0x1;
pub const NUD_REACHABLE: u16 = 0x2;
pub const NUD_STALE: u16 = 0x4;
pub const NUD_FAILED: u16 = 0x20;
pub const NUD_NOARP: u16 = 0x40;
pub const NUD_PERMANENT: u16 = 0x80;

const NLA_TYPE_MASK: u16 = 0x3fff;
pub const NLMSG_HDRLEN: usize = 16;

/// A message or attribute that does not fit its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireError(pub &'static str);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for WireError {}

#[inline]
pub(crate) fn align4(n: usize) -> usize {
    (n + 3) & !3
}

#[inline]
fn ne16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

#[inline]
fn ne32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// An attribute's payload as a host-order u32.
pub fn attr_u32(data: &[u8]) -> Result<u32, WireError> {
    ne32(data, 0).ok_or(WireError("u32 attribute shorter than 4 bytes"))
}

/// An address attribute of `family`.
pub fn attr_addr(family: u8, data: &[u8]) -> Result<IpAddr, WireError> {
    match (family, data.len()) {
        (AF_INET, 4) => Ok(IpAddr::V4(Ipv4Addr::new(data[0], data[1], data[2], data[3]))),
        (AF_INET6, 16) => {
            let mut b = [0u8; 16];
            b.copy_from_slice(data);
            Ok(IpAddr::V6(Ipv6Addr::from(b)))
        }
        (AF_INET | AF_INET6, _) => Err(WireError("address attribute of the wrong length")),
        _ => Err(WireError("address of an unknown family")),
    }
}

/// One netlink message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NlMsg<'a> {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    pub pid: u32,
    /// The bytes after the 16-byte header, up to `nlmsg_len`.
    pub payload: &'a [u8],
}

impl NlMsg<'_> {
    /// For NLMSG_ERROR: the (negative) errno, 0 for an ACK.
    pub fn error_code(&self) -> Option<i32> {
        (self.ty == NLMSG_ERROR).then(|| ne32(self.payload, 0).map(|e| e as i32)).flatten()
    }
}

/// The messages of a buffer, in order. Stops after the first error.
pub struct NlMessages<'a> {
    buf: &'a [u8],
}

impl<'a> NlMessages<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        NlMessages { buf }
    }
}

impl<'a> Iterator for NlMessages<'a> {
    type Item = Result<NlMsg<'a>, WireError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let b = self.buf;
        let Some(len) = ne32(b, 0) else {
            self.buf = &[];
            return Some(Err(WireError("truncated netlink header")));
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || len > b.len() {
            self.buf = &[];
            return Some(Err(WireError("netlink message length out of bounds")));
        }
        let msg = NlMsg {
            ty: ne16(b, 4).unwrap_or_default(),
            flags: ne16(b, 6).unwrap_or_default(),
            seq: ne32(b, 8).unwrap_or_default(),
            pid: ne32(b, 12).unwrap_or_default(),
            payload: &b[NLMSG_HDRLEN..len],
        };
        self.buf = b.get(align4(len)..).unwrap_or(&[]);
        Some(Ok(msg))
    }
}

/// The attributes (`rtattr`/`nlattr`) of an area: (type without the
/// nested/byte-order flags, payload). Stops after the first error.
#[derive(Clone)]
pub struct Attrs<'a> {
    buf: &'a [u8],
}

impl<'a> Attrs<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Attrs { buf }
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), WireError>;
    fn next(&mut self) -> Option<Self::Item> {
        // Trailing bytes shorter than an attribute header are padding.
        if self.buf.len() < 4 {
            return None;
        }
        let b = self.buf;
        let len = usize::from(ne16(b, 0).unwrap_or_default());
        let ty = ne16(b, 2).unwrap_or_default() & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            self.buf = &[];
            return Some(Err(WireError("attribute length out of bounds")));
        }
        self.buf = b.get(align4(len)..).unwrap_or(&[]);
        Some(Ok((ty, &b[4..len])))
    }
}

/// `struct rtmsg` and the attributes tern uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteMsg<'a> {
    pub family: u8,
    pub dst_len: u8,
    pub src_len: u8,
    /// RTA_TABLE when present, else `rtm_table`.
    pub table: u32,
    pub protocol: u8,
    pub scope: u8,
    /// RTN_*.
    pub kind: u8,
    pub flags: u32,
    /// RTA_DST (None: the default route's all-zero prefix).
    pub dst: Option<IpAddr>,
    pub oif: Option<u32>,
    /// RTA_GATEWAY, or RTA_VIA (an IPv6 next hop of an IPv4 route).
    pub gateway: Option<IpAddr>,
    pub priority: u32,
    pub nh_id: Option<u32>,
    /// The raw RTA_MULTIPATH area (see [`RouteMsg::paths`]).
    pub multipath: Option<&'a [u8]>,
}

/// One member of RTA_MULTIPATH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathMsg {
    pub flags: u8,
    /// Weight - 1 (`rtnh_hops`).
    pub hops: u8,
    pub ifindex: u32,
    pub gateway: Option<IpAddr>,
}

fn via(data: &[u8]) -> Result<IpAddr, WireError> {
    let fam = ne16(data, 0).ok_or(WireError("RTA_VIA too short"))?;
    let fam = u8::try_from(fam).map_err(|_| WireError("RTA_VIA of an unknown family"))?;
    attr_addr(fam, data.get(2..).unwrap_or_default())
}

impl<'a> RouteMsg<'a> {
    pub fn parse(payload: &'a [u8]) -> Result<RouteMsg<'a>, WireError> {
        let h = payload.get(..12).ok_or(WireError("rtmsg truncated"))?;
        let mut r = RouteMsg {
            family: h[0],
            dst_len: h[1],
            src_len: h[2],
            table: u32::from(h[4]),
            protocol: h[5],
            scope: h[6],
            kind: h[7],
            flags: ne32(h, 8).unwrap_or_default(),
            dst: None,
            oif: None,
            gateway: None,
            priority: 0,
            nh_id: None,
            multipath: None,
        };
        if r.family != AF_INET && r.family != AF_INET6 {
            return Err(WireError("route of an unknown family"));
        }
        for a in Attrs::new(&payload[12..]) {
            let (ty, data) = a?;
            match ty {
                RTA_DST => r.dst = Some(attr_addr(r.family, data)?),
                RTA_OIF => r.oif = Some(attr_u32(data)?),
                RTA_GATEWAY => r.gateway = Some(attr_addr(r.family, data)?),
                RTA_VIA => r.gateway = Some(via(data)?),
                RTA_PRIORITY => r.priority = attr_u32(data)?,
                RTA_TABLE => r.table = attr_u32(data)?,
                RTA_NH_ID => r.nh_id = Some(attr_u32(data)?),
                RTA_MULTIPATH => r.multipath = Some(data),
                _ => {}
            }
        }
        Ok(r)
    }

    /// The members of RTA_MULTIPATH, in order.
    pub fn paths(&self) -> Paths<'a> {
        Paths { buf: self.multipath.unwrap_or_default(), family: self.family }
    }
}

/// Iterator over RTA_MULTIPATH members (`struct rtnexthop` + attributes).
pub struct Paths<'a> {
    buf: &'a [u8],
    family: u8,
}

impl Iterator for Paths<'_> {
    type Item = Result<PathMsg, WireError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.len() < 8 {
            return None;
        }
        let b = self.buf;
        let len = usize::from(ne16(b, 0).unwrap_or_default());
        if len < 8 || len > b.len() {
            self.buf = &[];
            return Some(Err(WireError("rtnexthop length out of bounds")));
        }
        self.buf = b.get(align4(len)..).unwrap_or(&[]);
        let mut p = PathMsg { flags: b[2], hops: b[3], ifindex: ne32(b, 4).unwrap_or_default(), gateway: None };
        for a in Attrs::new(&b[8..len]) {
            match a {
                Ok((RTA_GATEWAY, data)) => match attr_addr(self.family, data) {
                    Ok(g) => p.gateway = Some(g),
                    Err(e) => return Some(Err(e)),
                },
                Ok((RTA_VIA, data)) => match via(data) {
                    Ok(g) => p.gateway = Some(g),
                    Err(e) => return Some(Err(e)),
                },
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(p))
    }
}

/// `struct nhmsg` (RTM_NEWNEXTHOP/DELNEXTHOP, Linux 5.3+).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NexthopMsg<'a> {
    pub family: u8,
    pub protocol: u8,
    pub flags: u32,
    pub id: u32,
    pub oif: Option<u32>,
    pub gateway: Option<IpAddr>,
    pub blackhole: bool,
    /// The raw NHA_GROUP array (see [`NexthopMsg::group`]).
    pub group: Option<&'a [u8]>,
}

impl<'a> NexthopMsg<'a> {
    pub fn parse(payload: &'a [u8]) -> Result<NexthopMsg<'a>, WireError> {
        let h = payload.get(..8).ok_or(WireError("nhmsg truncated"))?;
        let mut n = NexthopMsg {
            family: h[0],
            protocol: h[2],
            flags: ne32(h, 4).unwrap_or_default(),
            id: 0,
            oif: None,
            gateway: None,
            blackhole: false,
            group: None,
        };
        let mut have_id = false;
        for a in Attrs::new(&payload[8..]) {
            let (ty, data) = a?;
            match ty {
                NHA_ID => {
                    n.id = attr_u32(data)?;
                    have_id = true;
                }
                NHA_OIF => n.oif = Some(attr_u32(data)?),
                NHA_GATEWAY => n.gateway = Some(attr_addr(n.family, data)?),
                NHA_BLACKHOLE => n.blackhole = true,
                NHA_GROUP => {
                    if !data.len().is_multiple_of(8) {
                        return Err(WireError("NHA_GROUP not a whole number of entries"));
                    }
                    n.group = Some(data);
                }
                _ => {}
            }
        }
        if !have_id {
            return Err(WireError("next-hop object without NHA_ID"));
        }
        Ok(n)
    }

    /// Group members: (next-hop id, weight 1..=65536).
    pub fn group(&self) -> impl Iterator<Item = (u32, u32)> + 'a {
        self.group.unwrap_or_default().chunks_exact(8).map(|c| {
            let id = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
            // weight - 1 in the low byte, the high byte since Linux 6.12.
            let w = u32::from(c[4]) | u32::from(c[5]) << 8;
            (id, w + 1)
        })
    }
}

/// `struct ifinfomsg` and the attributes tern uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkMsg<'a> {
    pub index: u32,
    pub flags: u32,
    pub name: Option<&'a str>,
    pub mac: Option<[u8; 6]>,
    pub mtu: Option<u32>,
    /// IFLA_LINK: the lower device (a macvlan's or VLAN's parent).
    pub link: Option<u32>,
    /// IFLA_LINKINFO's IFLA_INFO_KIND ("macvlan", "vlan", ...).
    pub kind: Option<&'a str>,
    /// IFLA_PROTO_DOWN (FRR's vrrpd sets it on a backup's macvlan).
    pub proto_down: bool,
}

impl<'a> LinkMsg<'a> {
    pub fn parse(payload: &'a [u8]) -> Result<LinkMsg<'a>, WireError> {
        let h = payload.get(..16).ok_or(WireError("ifinfomsg truncated"))?;
        let mut l = LinkMsg {
            index: ne32(h, 4).unwrap_or_default(),
            flags: ne32(h, 8).unwrap_or_default(),
            name: None,
            mac: None,
            mtu: None,
            link: None,
            kind: None,
            proto_down: false,
        };
        for a in Attrs::new(&payload[16..]) {
            let (ty, data) = a?;
            match ty {
                IFLA_IFNAME => {
                    let s = data.split(|&c| c == 0).next().unwrap_or_default();
                    l.name = Some(std::str::from_utf8(s).map_err(|_| WireError("interface name is not UTF-8"))?);
                }
                IFLA_ADDRESS => l.mac = <[u8; 6]>::try_from(data).ok(),
                IFLA_MTU => l.mtu = Some(attr_u32(data)?),
                IFLA_LINK => l.link = Some(attr_u32(data)?),
                IFLA_PROTO_DOWN => l.proto_down = data.first().is_some_and(|&b| b != 0),
                IFLA_LINKINFO => {
                    for a in Attrs::new(data) {
                        let (ty, data) = a?;
                        if ty == IFLA_INFO_KIND {
                            let s = data.split(|&c| c == 0).next().unwrap_or_default();
                            l.kind = std::str::from_utf8(s).ok();
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(l)
    }

    /// Administratively up with carrier (IFF_UP and IFF_LOWER_UP).
    pub fn is_up(&self) -> bool {
        self.flags & IFF_UP != 0 && self.flags & IFF_LOWER_UP != 0
    }
}

/// `struct ifaddrmsg` and its address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrMsg {
    pub family: u8,
    pub prefix_len: u8,
    pub flags: u32,
    pub scope: u8,
    pub index: u32,
    /// IFA_LOCAL when present (the local end of a point-to-point link),
    /// else IFA_ADDRESS.
    pub addr: IpAddr,
}

impl AddrMsg {
    pub fn parse(payload: &[u8]) -> Result<AddrMsg, WireError> {
        let h = payload.get(..8).ok_or(WireError("ifaddrmsg truncated"))?;
        let (family, prefix_len, scope) = (h[0], h[1], h[3]);
        let mut flags = u32::from(h[2]);
        let (mut address, mut local) = (None, None);
        for a in Attrs::new(&payload[8..]) {
            let (ty, data) = a?;
            match ty {
                IFA_ADDRESS => address = Some(attr_addr(family, data)?),
                IFA_LOCAL => local = Some(attr_addr(family, data)?),
                IFA_FLAGS => flags = attr_u32(data)?,
                _ => {}
            }
        }
        let addr = local.or(address).ok_or(WireError("address message without an address"))?;
        let max = if family == AF_INET { 32 } else { 128 };
        if prefix_len > max {
            return Err(WireError("address prefix length too long"));
        }
        Ok(AddrMsg { family, prefix_len, flags, scope, index: ne32(h, 4).unwrap_or_default(), addr })
    }
}

/// `struct ndmsg` and its addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeighMsg {
    pub family: u8,
    pub index: u32,
    /// NUD_*.
    pub state: u16,
    pub dst: Option<IpAddr>,
    pub lladdr: Option<[u8; 6]>,
}

impl NeighMsg {
    pub fn parse(payload: &[u8]) -> Result<NeighMsg, WireError> {
        let h = payload.get(..12).ok_or(WireError("ndmsg truncated"))?;
        let mut n = NeighMsg {
            family: h[0],
            index: ne32(h, 4).unwrap_or_default(),
            state: ne16(h, 8).unwrap_or_default(),
            dst: None,
            lladdr: None,
        };
        for a in Attrs::new(&payload[12..]) {
            let (ty, data) = a?;
            match ty {
                NDA_DST if n.family == AF_INET || n.family == AF_INET6 => n.dst = Some(attr_addr(n.family, data)?),
                NDA_LLADDR => n.lladdr = <[u8; 6]>::try_from(data).ok(),
                _ => {}
            }
        }
        Ok(n)
    }
}

// ------------------------------------------------------------------ builder

/// Builds netlink messages: requests to the kernel, and test input.
#[derive(Clone, Debug, Default)]
pub struct NlBuilder {
    pub buf: Vec<u8>,
    start: usize,
    nests: Vec<usize>,
}

fn addr_bytes(a: IpAddr) -> Vec<u8> {
    match a {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    }
}

fn family_of(a: IpAddr) -> u8 {
    if a.is_ipv4() { AF_INET } else { AF_INET6 }
}

impl NlBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a message; the header's length is filled in by [`NlBuilder::end`].
    pub fn begin(&mut self, ty: u16, flags: u16, seq: u32) -> &mut Self {
        self.pad();
        self.start = self.buf.len();
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes());
        self
    }

    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    pub fn attr(&mut self, ty: u16, data: &[u8]) -> &mut Self {
        self.pad();
        let len = u16::try_from(4 + data.len()).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.buf.extend_from_slice(data);
        self
    }

    pub fn attr_u32(&mut self, ty: u16, v: u32) -> &mut Self {
        self.attr(ty, &v.to_ne_bytes())
    }

    pub fn nest_begin(&mut self, ty: u16) -> &mut Self {
        self.pad();
        self.nests.push(self.buf.len());
        self.buf.extend_from_slice(&0u16.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self
    }

    pub fn nest_end(&mut self) -> &mut Self {
        if let Some(at) = self.nests.pop() {
            let len = u16::try_from(self.buf.len() - at).unwrap_or(u16::MAX);
            self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    /// Closes the current message (sets `nlmsg_len`).
    pub fn end(&mut self) -> &mut Self {
        let len = u32::try_from(self.buf.len() - self.start).unwrap_or(u32::MAX);
        self.buf[self.start..self.start + 4].copy_from_slice(&len.to_ne_bytes());
        self.pad();
        self
    }

    /// A dump request for one message family (`rtgenmsg`-sized header of
    /// the right struct, all zero but the family).
    pub fn dump_request(&mut self, ty: u16, seq: u32) -> &mut Self {
        let hdr = match ty {
            RTM_GETLINK => 16,
            RTM_GETADDR | RTM_GETNEXTHOP => 8,
            RTM_GETNEIGH | RTM_GETROUTE => 12,
            _ => 4,
        };
        self.begin(ty, NLM_F_REQUEST | NLM_F_DUMP, seq);
        self.buf.extend(std::iter::repeat_n(0, hdr));
        self.end()
    }

    /// A route message (tests, benchmarks, fuzz seeds).
    pub fn route(&mut self, ty: u16, seq: u32, r: &RouteSpec) -> &mut Self {
        let family = family_of(r.dst);
        let flags = if ty == RTM_NEWROUTE { NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE } else { NLM_F_REQUEST };
        self.begin(ty, flags, seq);
        let table = u8::try_from(r.table).unwrap_or(0);
        self.bytes(&[family, r.dst_len, 0, 0, table, r.protocol, 0, r.kind]);
        self.bytes(&0u32.to_ne_bytes());
        if r.table > 255 {
            self.attr_u32(RTA_TABLE, r.table);
        }
        self.attr(RTA_DST, &addr_bytes(r.dst));
        if r.priority != 0 {
            self.attr_u32(RTA_PRIORITY, r.priority);
        }
        if let Some(id) = r.nh_id {
            self.attr_u32(RTA_NH_ID, id);
        }
        match r.paths.as_slice() {
            [] => {}
            [(gw, oif)] => {
                if let Some(gw) = gw {
                    self.gateway(family, *gw);
                }
                self.attr_u32(RTA_OIF, *oif);
            }
            many => {
                self.nest_begin(RTA_MULTIPATH);
                for (gw, oif) in many {
                    self.pad();
                    let at = self.buf.len();
                    self.bytes(&0u16.to_ne_bytes()).bytes(&[0, 0]).bytes(&oif.to_ne_bytes());
                    if let Some(gw) = gw {
                        self.gateway(family, *gw);
                    }
                    let len = u16::try_from(self.buf.len() - at).unwrap_or(u16::MAX);
                    self.buf[at..at + 2].copy_from_slice(&len.to_ne_bytes());
                }
                self.nest_end();
            }
        }
        self.end()
    }

    fn gateway(&mut self, family: u8, gw: IpAddr) {
        if family_of(gw) == family {
            self.attr(RTA_GATEWAY, &addr_bytes(gw));
        } else {
            let mut v = u16::from(family_of(gw)).to_ne_bytes().to_vec();
            v.extend(addr_bytes(gw));
            self.attr(RTA_VIA, &v);
        }
    }

    /// A next-hop object message: one gateway, a blackhole, or a group of
    /// (id, weight) members.
    pub fn nexthop(&mut self, ty: u16, seq: u32, n: &NexthopSpec) -> &mut Self {
        let family = match n.gateway {
            Some(g) => family_of(g),
            None => 0,
        };
        self.begin(ty, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE, seq);
        self.bytes(&[family, 0, n.protocol, 0]).bytes(&0u32.to_ne_bytes());
        self.attr_u32(NHA_ID, n.id);
        if n.blackhole {
            self.attr(NHA_BLACKHOLE, &[]);
        }
        if let Some(oif) = n.oif {
            self.attr_u32(NHA_OIF, oif);
        }
        if let Some(g) = n.gateway {
            self.attr(NHA_GATEWAY, &addr_bytes(g));
        }
        if !n.group.is_empty() {
            let mut v = Vec::new();
            for &(id, w) in &n.group {
                let w = w.clamp(1, 256) - 1;
                v.extend_from_slice(&id.to_ne_bytes());
                v.extend_from_slice(&[w as u8, 0, 0, 0]);
            }
            self.attr(NHA_GROUP, &v);
        }
        self.end()
    }

    /// An address message (RTM_NEWADDR/DELADDR).
    pub fn address(&mut self, ty: u16, seq: u32, index: u32, addr: IpAddr, prefix_len: u8) -> &mut Self {
        let flags = if ty == RTM_NEWADDR { NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE } else { NLM_F_REQUEST };
        self.begin(ty, flags | NLM_F_ACK, seq);
        self.bytes(&[family_of(addr), prefix_len, 0, 0]).bytes(&index.to_ne_bytes());
        self.attr(IFA_LOCAL, &addr_bytes(addr));
        self.attr(IFA_ADDRESS, &addr_bytes(addr));
        self.end()
    }

    /// A link message (tests).
    pub fn link(&mut self, ty: u16, seq: u32, index: u32, name: &str, flags: u32, mac: [u8; 6]) -> &mut Self {
        self.begin(ty, 0, seq);
        self.bytes(&[0, 0, 1, 0]).bytes(&index.to_ne_bytes()).bytes(&flags.to_ne_bytes()).bytes(&0u32.to_ne_bytes());
        let mut n = name.as_bytes().to_vec();
        n.push(0);
        self.attr(IFLA_IFNAME, &n);
        self.attr(IFLA_ADDRESS, &mac);
        self.attr_u32(IFLA_MTU, 1500);
        self.end()
    }

    /// A neighbour message (tests).
    pub fn neigh(&mut self, ty: u16, seq: u32, index: u32, dst: IpAddr, state: u16, mac: Option<[u8; 6]>) -> &mut Self {
        self.begin(ty, 0, seq);
        self.bytes(&[family_of(dst), 0, 0, 0]).bytes(&index.to_ne_bytes()).bytes(&state.to_ne_bytes()).bytes(&[0, 0]);
        self.attr(NDA_DST, &addr_bytes(dst));
        if let Some(m) = mac {
            self.attr(NDA_LLADDR, &m);
        }
        self.end()
    }
}

/// What [`NlBuilder::route`] encodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteSpec {
    pub dst: IpAddr,
    pub dst_len: u8,
    pub table: u32,
    pub protocol: u8,
    pub kind: u8,
    pub priority: u32,
    pub nh_id: Option<u32>,
    /// (gateway, oif): one = RTA_GATEWAY/RTA_OIF, more = RTA_MULTIPATH.
    pub paths: Vec<(Option<IpAddr>, u32)>,
}

impl RouteSpec {
    /// A unicast route in the main table.
    pub fn unicast(dst: IpAddr, dst_len: u8, paths: Vec<(Option<IpAddr>, u32)>) -> RouteSpec {
        RouteSpec {
            dst,
            dst_len,
            table: RT_TABLE_MAIN,
            protocol: 186,
            kind: RTN_UNICAST,
            priority: 20,
            nh_id: None,
            paths,
        }
    }
}

/// What [`NlBuilder::nexthop`] encodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NexthopSpec {
    pub id: u32,
    pub protocol: u8,
    pub gateway: Option<IpAddr>,
    pub oif: Option<u32>,
    pub blackhole: bool,
    pub group: Vec<(u32, u32)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn route_roundtrip_single_and_multipath() {
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 7, &RouteSpec::unicast(ip("10.1.0.0"), 16, vec![(Some(ip("10.0.0.2")), 3)]));
        let mut s = RouteSpec::unicast(ip("2001:db8::"), 32, vec![(Some(ip("fe80::1")), 3), (Some(ip("fe80::2")), 4)]);
        s.table = 1000;
        b.route(RTM_DELROUTE, 8, &s);
        let msgs: Vec<_> = NlMessages::new(&b.buf).collect::<Result<_, _>>().expect("msgs");
        assert_eq!(msgs.len(), 2);
        assert_eq!((msgs[0].ty, msgs[0].seq), (RTM_NEWROUTE, 7));
        let r = RouteMsg::parse(msgs[0].payload).expect("route");
        assert_eq!((r.dst, r.dst_len, r.table, r.kind), (Some(ip("10.1.0.0")), 16, 254, RTN_UNICAST));
        assert_eq!((r.gateway, r.oif, r.priority), (Some(ip("10.0.0.2")), Some(3), 20));
        assert_eq!(r.paths().count(), 0);
        let r = RouteMsg::parse(msgs[1].payload).expect("route");
        assert_eq!(r.table, 1000, "RTA_TABLE overrides rtm_table");
        let p: Vec<_> = r.paths().collect::<Result<_, _>>().expect("paths");
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].gateway, p[0].ifindex), (Some(ip("fe80::1")), 3));
        assert_eq!((p[1].gateway, p[1].ifindex), (Some(ip("fe80::2")), 4));
    }

    #[test]
    fn ipv4_route_with_ipv6_via() {
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 1, &RouteSpec::unicast(ip("10.1.0.0"), 16, vec![(Some(ip("fe80::9")), 2)]));
        let m = NlMessages::new(&b.buf).next().expect("one").expect("ok");
        let r = RouteMsg::parse(m.payload).expect("route");
        assert_eq!(r.gateway, Some(ip("fe80::9")));
    }

    #[test]
    fn nexthop_group_roundtrip() {
        let mut b = NlBuilder::new();
        b.nexthop(RTM_NEWNEXTHOP, 1, &NexthopSpec { id: 5, group: vec![(1, 1), (2, 3)], ..Default::default() });
        b.nexthop(
            RTM_NEWNEXTHOP,
            2,
            &NexthopSpec { id: 1, gateway: Some(ip("10.0.0.2")), oif: Some(3), ..Default::default() },
        );
        let msgs: Vec<_> = NlMessages::new(&b.buf).collect::<Result<_, _>>().expect("msgs");
        let g = NexthopMsg::parse(msgs[0].payload).expect("nh");
        assert_eq!(g.id, 5);
        assert_eq!(g.group().collect::<Vec<_>>(), vec![(1, 1), (2, 3)]);
        let n = NexthopMsg::parse(msgs[1].payload).expect("nh");
        assert_eq!((n.id, n.gateway, n.oif, n.blackhole), (1, Some(ip("10.0.0.2")), Some(3), false));
    }

    #[test]
    fn link_addr_neigh_roundtrip() {
        let mut b = NlBuilder::new();
        b.link(RTM_NEWLINK, 1, 9, "veth0", IFF_UP | IFF_LOWER_UP, [2, 0, 0, 0, 0, 1]);
        b.address(RTM_NEWADDR, 2, 9, ip("10.0.0.1"), 24);
        b.neigh(RTM_NEWNEIGH, 3, 9, ip("10.0.0.2"), NUD_REACHABLE, Some([2, 0, 0, 0, 0, 2]));
        let msgs: Vec<_> = NlMessages::new(&b.buf).collect::<Result<_, _>>().expect("msgs");
        let l = LinkMsg::parse(msgs[0].payload).expect("link");
        assert_eq!(
            (l.index, l.name, l.mac, l.mtu, l.is_up()),
            (9, Some("veth0"), Some([2, 0, 0, 0, 0, 1]), Some(1500), true)
        );
        let a = AddrMsg::parse(msgs[1].payload).expect("addr");
        assert_eq!((a.index, a.addr, a.prefix_len), (9, ip("10.0.0.1"), 24));
        let n = NeighMsg::parse(msgs[2].payload).expect("neigh");
        assert_eq!(
            (n.index, n.dst, n.state, n.lladdr),
            (9, Some(ip("10.0.0.2")), NUD_REACHABLE, Some([2, 0, 0, 0, 0, 2]))
        );
    }

    #[test]
    fn truncation_is_an_error_never_a_panic() {
        let mut b = NlBuilder::new();
        b.route(RTM_NEWROUTE, 1, &RouteSpec::unicast(ip("10.1.0.0"), 16, vec![(Some(ip("10.0.0.2")), 3)]));
        let full = b.buf.clone();
        for cut in 0..full.len() {
            for m in NlMessages::new(&full[..cut]).flatten() {
                let _ = RouteMsg::parse(m.payload);
            }
            // Corrupt one byte at a time too.
            let mut bad = full.clone();
            bad[cut] ^= 0xff;
            for m in NlMessages::new(&bad).flatten() {
                if let Ok(r) = RouteMsg::parse(m.payload) {
                    let _ = r.paths().count();
                }
            }
        }
        assert!(NlMessages::new(&full[..10]).next().expect("one").is_err());
        assert_eq!(RouteMsg::parse(&[2; 5]), Err(WireError("rtmsg truncated")));
    }

    #[test]
    fn attribute_lengths_are_checked() {
        // rta_len 200 in a 12-byte area.
        let mut area = vec![200, 0, 1, 0];
        area.extend_from_slice(&[0; 8]);
        assert!(Attrs::new(&area).next().expect("one").is_err());
        // A 4-byte address in an IPv6 route.
        let mut b = NlBuilder::new();
        b.begin(RTM_NEWROUTE, 0, 0).bytes(&[AF_INET6, 64, 0, 0, 254, 0, 0, 1, 0, 0, 0, 0]);
        b.attr(RTA_DST, &[10, 0, 0, 0]).end();
        let m = NlMessages::new(&b.buf).next().expect("one").expect("ok");
        assert!(RouteMsg::parse(m.payload).is_err());
    }
}
