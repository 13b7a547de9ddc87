//! Zero-copy header views and small reprs for the protocols tern forwards.
//!
//! The layout follows smoltcp's `wire` module: one file per protocol; for
//! each header a view `XxxPacket<T: AsRef<[u8]>>` that reads fields in place
//! (big-endian, fixed offsets) and, when `T: AsMut<[u8]>`, writes them; and a
//! small `XxxRepr` holding the fields that matter, with `parse`,
//! `buffer_len` and `emit`.
//!
//! | module | protocol |
//! |---|---|
//! | [`ethernet`], [`vlan`] | Ethernet II, 802.1Q / 802.1ad tags and the tag walker |
//! | [`arp`] | ARP for IPv4 over Ethernet (RFC 826) |
//! | [`ipv4`] | IPv4 (RFC 791) with options, checksum, fragments, DSCP/ECN |
//! | [`ipv6`], [`ipv6ext`] | IPv6 (RFC 8200) and the bounded extension-header walker |
//! | [`icmpv4`], [`icmpv6`], [`ndisc`] | ICMP (RFC 792), ICMPv6 (RFC 4443), Neighbour Discovery (RFC 4861) |
//! | [`udp`], [`tcp`] | UDP (RFC 768), TCP (RFC 9293) with options and MSS clamping |
//! | [`gre`], [`esp`] | GRE (RFC 2784, RFC 2890), ESP header (RFC 4303) |
//! | [`checksum`] | RFC 1071 sum, pseudo-headers, RFC 1624 incremental update |
//! | [`ip`] | IP protocol numbers |
//! | [`frame`] | the walk from an Ethernet frame to its transport header |
//! | [`pretty`] | one-line frame summaries (capture output) |
//!
//! # Speed
//!
//! Getters are `#[inline]` reads at fixed offsets: after the caller's one
//! length check, `Ipv4Packet::new_unchecked(buf).dst_addr_u32()` compiles to
//! a load and a `bswap`. Per-packet figures of the forwarding-path calls:
//! `cargo bench -p tern-bench --bench wire_hotpath`.
//!
//! # Panic rules
//!
//! Only two things in this crate may panic, and both are opt-in:
//!
//! * `XxxPacket::new_unchecked` does not look at the buffer. The getters,
//!   setters and payload accessors of a view built this way index the buffer
//!   directly and **panic if the buffer is too short** for the field. This is
//!   the fast path: a node checks one length, calls `new_unchecked` and reads
//!   fields with plain loads.
//! * The same holds for a checked view whose buffer the caller mutates through
//!   setters (e.g. `set_header_len`, `set_total_len`) so that length fields
//!   point past the buffer: the view is then, in effect, unchecked again.
//!
//! Everything else never panics, whatever the bytes:
//!
//! * `new_checked` (= `new_unchecked` + `check_len`) validates every length
//!   field of the header against the buffer, so that every getter and payload
//!   accessor of the returned view is in bounds.
//! * `XxxRepr::parse` checks what it reads and returns an [`Error`].
//! * `XxxRepr::emit` first checks that the view's buffer holds
//!   `buffer_len()` bytes and returns [`Error::Truncated`] otherwise.
//! * Walkers over variable-length parts (VLAN tags, IPv6 extension headers,
//!   ND options, TCP options) stop after a fixed number of steps and return
//!   an error rather than loop on hostile input.
//!
//! Views over unchecked buffers of adequate length and checked views are
//! what property tests and fuzz targets exercise with arbitrary bytes.
#![forbid(unsafe_code)]

mod field;

pub mod arp;
pub mod checksum;
pub mod esp;
pub mod ethernet;
pub mod frame;
pub mod gre;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod ipv6ext;
pub mod ndisc;
pub mod pretty;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use checksum::IpPair;
pub use esp::{EspPacket, EspRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use frame::{TransportWalk, walk_transport};
pub use gre::{GrePacket, GreRepr};
pub use icmpv4::{Icmpv4Packet, Icmpv4Repr, Icmpv4Type};
pub use icmpv6::{Icmpv6Packet, Icmpv6Repr, Icmpv6Type};
pub use ip::IpProtocol;
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use ipv6ext::{Ipv6ExtHeader, Ipv6ExtWalk, Ipv6FragmentHeader, Ipv6FragmentRepr};
pub use ndisc::{NdOption, NdOptions, NdiscRepr, PrefixInfo};
pub use tcp::{TcpFlags, TcpOption, TcpOptions, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanRepr, VlanTag, VlanWalk};

pub use core::net::{Ipv4Addr, Ipv6Addr};

use core::fmt;

/// Why a buffer could not be read as, or written into, a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field in it
    /// says it should be.
    Truncated,
    /// A field holds a value the protocol forbids (a length smaller than the
    /// fixed header, a wrong version, a reserved bit set, a zero-length ND
    /// option, ...).
    Malformed,
    /// A checksum did not verify.
    BadChecksum,
    /// Well-formed, but outside what tern handles (an ARP packet for another
    /// hardware type, a GRE version 1 header, more extension headers than
    /// the walker's bound, ...).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::BadChecksum => "bad checksum",
            Error::Unsupported => "unsupported packet",
        })
    }
}

impl std::error::Error for Error {}

/// Result of parsing or emitting a header.
pub type Result<T> = core::result::Result<T, Error>;

/// Whether a `Repr::parse` verifies the checksum it covers.
///
/// Forwarding nodes that already verified (or deliberately do not verify,
/// as a router need not for transit upper-layer checksums) pass `Ignore`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ChecksumMode {
    /// Verify, and fail with [`Error::BadChecksum`] on a mismatch.
    #[default]
    Verify,
    /// Do not look at the checksum.
    Ignore,
}

impl ChecksumMode {
    #[inline]
    pub(crate) fn verify(self) -> bool {
        matches!(self, ChecksumMode::Verify)
    }
}
