//! IKEv2 (RFC 7296) for tern, sans-IO: nothing here opens a socket, reads
//! a clock or spawns a thread. The control side (`tern-control`'s IKE
//! service) feeds datagrams and the time in and carries out what comes
//! back ([`Output`]): datagrams to send, child SAs to install in the ESP
//! data plane, SAs to delete.
//!
//! Layout:
//! - [`wire`]: the message codec (header, every payload, the encrypted
//!   and fragment payloads' framing); fuzzed.
//! - [`proposal`]: algorithms, strongSwan's proposal syntax
//!   (`aes128gcm16-prfsha256-x25519`), proposal selection.
//! - [`crypto`]: Diffie-Hellman groups, PRFs and `prf+`, the IKE and
//!   child SA key material, the encrypted payload's seal and open.
//! - [`auth`]: pre-shared keys and certificates (X.509 chains checked
//!   against configured CAs, RFC 7427 signatures), identities.
//! - [`config`]: what a peer is configured with.
//! - [`sa`]: one IKE SA's state machine (exchanges, child SAs, rekeying,
//!   liveness, retransmission).
//! - [`ike`]: [`Ike`], the engine: IKE SAs by SPI, cookies and half-open
//!   limits, timers, the entry points the service calls.

#![forbid(unsafe_code)]

mod addr_counts;
pub mod auth;
pub mod config;
pub mod crypto;
mod eventlog;
pub mod ike;
pub mod listing;
pub mod output;
mod peers;
pub mod proposal;
pub mod sa;
pub mod wire;

pub use config::{AuthConfig, Identity, PeerConfig, Settings, TrafficSelector};
pub use ike::{Ike, IkeSaInfo, IkeStats};
pub use listing::{SaFilter, SaSummary, StateCounts};
pub use output::{ChildSa, EspKeys, Output};
