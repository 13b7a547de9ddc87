//! Test helpers shared by tern's crates (a dev-dependency only):
//!
//! * [`packet`]: frames built with `tern-wire`'s `Repr::emit` and read back
//!   with its `parse`;
//! * [`netns`]: throwaway namespaces, veth pairs and the two-host lab;
//! * [`frr`]: the FRR and BIRD lab of `scripts/frr/lab.sh` and the
//!   in-process router polling its tests and measurement share;
//! * [`pcap`]: pcap files in and out;
//! * [`golden`]: the golden runner, blessed with `TERN_BLESS=1`;
//! * [`config`]: router configurations (interfaces, routes, neighbours,
//!   ACL rules) written as the TOML the daemon reads.

#![forbid(unsafe_code)]

pub mod config;
pub mod frr;
pub mod golden;
pub mod netns;
pub mod packet;
pub mod pcap;

/// The wire crate the builders use, for tests that read headers directly.
pub use tern_wire as wire;
