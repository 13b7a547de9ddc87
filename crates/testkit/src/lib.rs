//! Test helpers shared by tern's crates (a dev-dependency, except
//! [`netns`], which `tern lab` and the laboratory use too: without the
//! default `full` feature only that module is built):
//!
//! * [`packet`]: frames built with `tern-wire`'s `Repr::emit` and read back
//!   with its `parse`;
//! * [`netns`]: throwaway namespaces, veth pairs and the two-host lab;
//! * [`frr`]: the FRR and BIRD lab of `scripts/frr/lab.sh` and the
//!   in-process router polling its tests and measurement share;
//! * [`pcap`]: pcap files in and out;
//! * [`golden`]: the golden runner, blessed with `TERN_BLESS=1`;
//! * [`strongswan`]: strongSwan's charon as a peer, one instance per
//!   namespace with its own configuration, VICI socket and log;
//! * [`cpu`]: pinning a test's thread to one CPU (per-CPU dataplane
//!   state);
//! * [`ping`]: ICMP echo that waits for every answer (iputils' `ping -c`
//!   calls a late answer lost);
//! * [`config`]: router configurations (interfaces, routes, neighbours,
//!   ACL rules) written as the TOML the daemon reads.

#![forbid(unsafe_code)]

#[cfg(feature = "full")]
pub mod config;
#[cfg(feature = "full")]
pub mod cpu;
#[cfg(feature = "full")]
pub mod frr;
#[cfg(feature = "full")]
pub mod golden;
pub mod netns;
#[cfg(feature = "full")]
pub mod packet;
#[cfg(feature = "full")]
pub mod pcap;
#[cfg(feature = "full")]
pub mod ping;
#[cfg(feature = "full")]
pub mod strongswan;

/// The wire crate the builders use, for tests that read headers directly.
#[cfg(feature = "full")]
pub use tern_wire as wire;
