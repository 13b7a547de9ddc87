//! VRRPv3 (RFC 5798) for IPv4 and IPv6, sans-IO in the manner of smoltcp:
//! the advertisement codec ([`packet`]) and one virtual router's state
//! machine ([`machine`]). Nothing here opens a socket, reads a clock or
//! sleeps: the caller passes received messages and the time in, and
//! carries out the [`Action`]s that come back (tern's control thread,
//! `crates/control/src/vrrp.rs`).

#![forbid(unsafe_code)]

pub mod machine;
pub mod packet;

pub use machine::{Action, Config, ConfigError, Machine, State, Stats};
pub use packet::{Advert, DropReason, EncodeError, Family, GROUP_V4, GROUP_V6, PROTO, virtual_link_local, virtual_mac};
