//! IPv4 forwarding nodes, one a file: `ip4-input` ([`input`]),
//! `ip4-lookup` ([`lookup`]), `ip4-rewrite` ([`rewrite`], whose loops
//! `ip6-rewrite` shares), `ip4-local` ([`local`]).

pub mod input;
pub mod local;
pub mod lookup;
pub mod rewrite;

pub use input::{Ip4Input, Ip4InputError, Ip4InputNext};
pub use local::{Ip4Local, Ip4LocalError, Ip4LocalNext};
pub use lookup::{Ip4Lookup, Ip4LookupError, Ip4LookupNext};
pub use rewrite::{Ip4Rewrite, Ip4RewriteError, RewriteNext};

pub(crate) use input::acl_in_by_index;
pub(crate) use lookup::trace_nh;
pub(crate) use rewrite::{RewriteSteps, copy_l2, direct_path, rewrite_batch, rewrite_batch_acl, trace_rewrite};

use crate::acl::Pattern;
use crate::shortcut::{AclShortcut, Asked, FlowPattern, InputAcl, NO_FLOW, OutputAcl, ValidateAcl, meta16};
use crate::state::{AclTable, IfTable, Params};
use crate::util::*;
use tern_engine::{Cx, ErrorDesc, NEXT_DROP, Node};
use tern_fib::{FibReader, NextHop, NhId, NhKind};
use tern_intrin::Bytes16;
use tern_packet::{MAX_BATCH, Meta, PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::checksum;

/// ICMP type/code (and MTU) a node asks `ip4-icmp-error` to send, packed
/// into `Meta::aux`.
#[inline]
pub fn icmp_aux(ty: u8, code: u8, mtu: u16) -> u32 {
    u32::from(mtu) << 16 | u32::from(ty) << 8 | u32::from(code)
}

pub const ICMP_DEST_UNREACH: u8 = 3;
pub const ICMP_TIME_EXCEEDED: u8 = 11;
pub const UNREACH_NET: u8 = 0;
pub const UNREACH_HOST: u8 = 1;
pub const UNREACH_PROTOCOL: u8 = 2;
pub const UNREACH_PORT: u8 = 3;
pub const UNREACH_FRAG_NEEDED: u8 = 4;
pub const UNREACH_ADMIN: u8 = 13;
