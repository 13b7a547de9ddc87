//! The public vocabulary of the FIB: next hops, sources, targets, reports.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use crate::prefix::Prefix;

/// Index into the next-hop table. Readers get one from a lookup and turn it
/// into a [`NextHop`] with `FibReader::nexthop`.
pub type NhId = u32;

/// Reserved id: "no route". Lookups return it on a miss.
pub const NH_NONE: NhId = 0;

/// What a forwarding worker does with a packet whose lookup gave this next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum NhKind {
    /// No route (also what an unknown id reads as).
    None,
    /// Send to `mac` (if resolved) on `ifindex`; `gw` is the neighbour.
    Unicast,
    /// A connected subnet on `ifindex`: the packet's own destination must be
    /// resolved (ARP/ND).
    Glean,
    /// One of the router's own addresses; `ifindex` owns it.
    Local,
    /// Drop silently.
    Blackhole,
    /// Drop with ICMP destination unreachable (host unreachable).
    Unreachable,
    /// Drop with ICMP destination unreachable (administratively prohibited).
    Prohibit,
    /// A group: readers call `ecmp_pick(id, flow_hash)` to get a member.
    Ecmp,
}

impl NhKind {
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            NhKind::None => 0,
            NhKind::Unicast => 1,
            NhKind::Glean => 2,
            NhKind::Local => 3,
            NhKind::Blackhole => 4,
            NhKind::Unreachable => 5,
            NhKind::Prohibit => 6,
            NhKind::Ecmp => 7,
        }
    }

    pub(crate) fn from_u8(v: u8) -> NhKind {
        match v {
            1 => NhKind::Unicast,
            2 => NhKind::Glean,
            3 => NhKind::Local,
            4 => NhKind::Blackhole,
            5 => NhKind::Unreachable,
            6 => NhKind::Prohibit,
            7 => NhKind::Ecmp,
            _ => NhKind::None,
        }
    }
}

/// A next hop as readers see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct NextHop {
    pub kind: NhKind,
    pub ifindex: u16,
    /// The neighbour for `Unicast`; the unspecified address of the route's
    /// family for the other kinds.
    pub gw: IpAddr,
    /// The neighbour's MAC once ARP/ND resolved it (`Unicast` only).
    pub mac: Option<[u8; 6]>,
}

impl NextHop {
    /// What `nexthop()` returns for NH_NONE and for unknown ids.
    pub const NONE: NextHop =
        NextHop { kind: NhKind::None, ifindex: 0, gw: IpAddr::V4(Ipv4Addr::UNSPECIFIED), mac: None };
}

/// Who installed a route. The declaration order breaks ties between routes
/// of equal (distance, metric) for one prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Source {
    Connected,
    Local,
    Static,
    Config,
    Kernel,
    Fpm,
    Api,
    Neighbor,
    /// Host routes of IKE remote-access clients (their virtual IPs).
    Ike,
}

impl Source {
    pub const ALL: [Source; 9] = [
        Source::Connected,
        Source::Local,
        Source::Static,
        Source::Config,
        Source::Kernel,
        Source::Fpm,
        Source::Api,
        Source::Neighbor,
        Source::Ike,
    ];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The administrative distance used when a route does not carry one.
    /// Kernel routes use `FibConfig::kernel_distance` instead of this value.
    pub fn default_distance(self) -> u8 {
        match self {
            Source::Connected | Source::Local => 0,
            Source::Static | Source::Config | Source::Api | Source::Ike => 1,
            Source::Fpm => 20,
            Source::Kernel => 100,
            Source::Neighbor => 250,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Source::Connected => "connected",
            Source::Local => "local",
            Source::Static => "static",
            Source::Config => "config",
            Source::Kernel => "kernel",
            Source::Fpm => "fpm",
            Source::Api => "api",
            Source::Neighbor => "neighbor",
            Source::Ike => "ike",
        };
        f.write_str(s)
    }
}

/// Where a route sends packets.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum RouteTarget {
    /// Through a gateway. Without an ifindex the gateway is resolved through
    /// the connected routes (one level); while it cannot be, the route stays
    /// in the RIB, inactive.
    Via {
        gw: IpAddr,
        ifindex: Option<u16>,
    },
    /// A subnet attached to `ifindex`.
    Connected {
        ifindex: u16,
    },
    /// An address of the router itself, owned by `ifindex`.
    Local {
        ifindex: u16,
    },
    Blackhole,
    Unreachable,
    Prohibit,
    /// Equal-cost multipath: each member resolved like `Via`; members that
    /// cannot be resolved are left out; no member resolved = inactive.
    Ecmp(Vec<(IpAddr, Option<u16>)>),
}

/// Per-route attributes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RouteAttrs {
    /// Administrative distance; `None` = the source's default.
    pub distance: Option<u8>,
    /// Compared after the distance; lower wins.
    pub metric: u32,
}

/// One typed route change (FRR dplane style), for batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteOp {
    Add(Source, Prefix, RouteTarget, RouteAttrs),
    Del(Source, Prefix),
}

impl RouteOp {
    /// The prefix the operation changes.
    pub fn prefix(&self) -> &Prefix {
        match self {
            RouteOp::Add(_, p, _, _) | RouteOp::Del(_, p) => p,
        }
    }
}

/// Why a route operation was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FibError {
    /// A gateway of the other family than the prefix.
    FamilyMismatch { prefix: Prefix, gw: IpAddr },
    /// Delete of a route this source does not have.
    NotFound { source: Source, prefix: Prefix },
    /// An ECMP target with no member.
    EmptyEcmp,
    /// More ECMP members than `FibConfig::max_ecmp_paths`.
    TooManyPaths { paths: usize, max: usize },
    /// A fixed-size table (named) is full; the route is in the RIB but not
    /// (yet) in the FIB. Raise the capacity in `FibConfig`; for "IPv4
    /// next-hop id space (15 bits)" and "IPv6 next-hop id space (13
    /// bits)", fewer next hops alive at once (see
    /// `FibConfig::max_nexthops`).
    Full(&'static str),
}

impl fmt::Display for FibError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FibError::FamilyMismatch { prefix, gw } => {
                write!(f, "gateway {gw} is not of the same family as {prefix}")
            }
            FibError::NotFound { source, prefix } => write!(f, "no {source} route for {prefix}"),
            FibError::EmptyEcmp => f.write_str("ECMP route without any path"),
            FibError::TooManyPaths { paths, max } => {
                write!(f, "ECMP route with {paths} paths (max {max})")
            }
            FibError::Full(what) => write!(f, "{what} full"),
        }
    }
}

impl std::error::Error for FibError {}

/// The outcome of [`crate::FibWriter::apply`]: valid operations are applied
/// even when others fail.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplyReport {
    pub applied: usize,
    pub failed: usize,
    /// (index of the operation in the batch, why it failed).
    pub errors: Vec<(usize, FibError)>,
}

/// One RIB entry as `tern route show` / `tern route get` print it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RouteDetail {
    pub prefix: Prefix,
    pub source: Source,
    pub distance: u8,
    pub metric: u32,
    pub target: RouteTarget,
    /// This entry drives the FIB for its prefix.
    pub best: bool,
    /// The target could be resolved (an inactive route waits for a
    /// connected route to its gateway).
    pub active: bool,
    /// The next-hop id this entry resolved to (NH_NONE if inactive).
    pub nh: NhId,
    /// The resolved next hop(s): one, or the members of an ECMP group.
    pub nexthops: Vec<NextHop>,
}

/// Counters and sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct FibStats {
    /// Prefixes installed in the IPv4 / IPv6 FIB (best, active routes).
    pub v4_routes: usize,
    pub v6_routes: usize,
    /// All RIB entries, all sources, active or not.
    pub rib_entries: usize,
    /// Live next hops (ECMP groups included) and ECMP groups alone.
    pub nexthops: usize,
    pub ecmp_groups: usize,
    /// Bytes of the lookup structures readers use (v4 + v6 + next hops).
    pub fib_bytes: usize,
    pub v4_bytes: usize,
    pub v6_bytes: usize,
    pub nexthop_bytes: usize,
    /// The writer's own bookkeeping: RIB entries and trie metadata
    /// (estimated from capacities).
    pub writer_bytes: usize,
    /// Update counters since start.
    pub adds: u64,
    pub dels: u64,
    pub errors: u64,
    /// Changes of the FIB (a prefix installed, changed or removed).
    pub fib_updates: u64,
    /// Memory blocks waiting for a grace period before reuse.
    pub pending_reclaim: usize,
}

/// Sizes and knobs, fixed at `new()`. The lookup tables are flat arrays of
/// fixed capacity (they mirror into BPF array maps, whose size is fixed at
/// creation); memory is reserved virtually and touched only when used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FibConfig {
    /// Next-hop table entries (ECMP groups included). IPv4 routes can only
    /// use ids below 2^15 and IPv6 routes ids below 2^13 (both tries'
    /// entries are 16 bits; IPv6's give more of their values to block
    /// numbers): IPv6 next hops take the lowest free id below 2^13, IPv4
    /// ones the lowest free id from 2^13 (below 2^13 when those are
    /// taken), so that holds while fewer than 8,191 IPv6 and 32,767 next
    /// hops in all are alive at once, however many IPv4 neighbours there
    /// are below that; a route whose
    /// next hop got a larger id stays in the RIB, not installed, and its
    /// `add_route` fails with `FibError::Full("IPv4 next-hop id space (15
    /// bits)")` (`"IPv6 next-hop id space (13 bits)"`).
    pub max_nexthops: u32,
    /// ECMP member slots, all groups together.
    pub max_ecmp_members: u32,
    /// Paths allowed in one ECMP route.
    pub max_ecmp_paths: usize,
    /// Distance of `Source::Kernel` routes that carry none.
    pub kernel_distance: u8,
    /// Trie blocks reserved for IPv4 (256 entries each, beyond the 2^24
    /// direct entries; the full table uses ~450; at most 2^15, the block
    /// numbers a 16-bit entry holds) and IPv6 (256 entries each, beyond
    /// the 2^24 direct entries; the full table uses ~38,100; at most
    /// 57,344, the block numbers a 16-bit IPv6 entry holds). `*_leaves` is
    /// unused (kept for
    /// compatibility with the first API draft).
    pub v4_nodes: u32,
    pub v4_leaves: u32,
    pub v6_nodes: u32,
    pub v6_leaves: u32,
}

impl Default for FibConfig {
    fn default() -> Self {
        FibConfig {
            max_nexthops: 1 << 16,
            max_ecmp_members: 1 << 16,
            max_ecmp_paths: 64,
            kernel_distance: 100,
            v4_nodes: 1 << 16,
            v4_leaves: 0,
            v6_nodes: 1 << 18,
            v6_leaves: 0,
        }
    }
}
