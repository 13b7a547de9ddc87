//! IPv6 forwarding nodes, one a file: `ip6-input` ([`input`]),
//! `ip6-lookup` ([`lookup`]), `ip6-rewrite` ([`rewrite`], on the loops of
//! `ip4-rewrite`), `ip6-local` ([`local`]: echo, Neighbour Discovery).

pub mod input;
pub mod local;
pub mod lookup;
pub mod rewrite;

pub use input::{Ip6Input, Ip6InputError, Ip6InputNext};
pub use local::{Ip6Local, Ip6LocalError, Ip6LocalNext};
pub use lookup::{Ip6Lookup, Ip6LookupError, Ip6LookupNext};
pub use rewrite::{Ip6Rewrite, Ip6RewriteError};

use crate::ip4::{RewriteNext, RewriteSteps, direct_path, icmp_aux, rewrite_batch, rewrite_batch_acl};
use crate::shortcut::{AclShortcut, InputAcl, NO_FLOW, OutputAcl, Pattern6, TCP_FLOW, ValidateAcl, meta16};
use crate::state::{AclTable, Event, Heard, IfTable, Iface, Params, Shared, is_link_local};
use crate::util::*;
use std::net::{IpAddr, Ipv6Addr};
use tern_engine::{Cx, ErrorDesc, NEXT_DROP, Node};
use tern_fib::{FibReader, NhId, NhKind};
use tern_intrin::Bytes16;
use tern_packet::{MAX_BATCH, Meta, PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::{IpProtocol, checksum, ipv6ext};

pub const ICMP6_DEST_UNREACH: u8 = 1;
pub const ICMP6_PACKET_TOO_BIG: u8 = 2;
pub const ICMP6_TIME_EXCEEDED: u8 = 3;
pub const ICMP6_PARAM_PROBLEM: u8 = 4;
pub const U6_NO_ROUTE: u8 = 0;
pub const U6_ADMIN: u8 = 1;
pub const U6_BEYOND_SCOPE: u8 = 2;
pub const U6_ADDR: u8 = 3;
pub const U6_PORT: u8 = 4;
pub const U6_REJECT: u8 = 6;

/// The IPv6 address at `at` in `d`, if all of it is there.
fn addr(d: &[u8], at: usize) -> Option<Ipv6Addr> {
    d.get(at..at + 16).and_then(|a| <[u8; 16]>::try_from(a).ok()).map(Ipv6Addr::from)
}
