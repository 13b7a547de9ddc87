//! tern's IPsec ESP data plane core (RFC 4303 tunnel mode): security
//! associations ([`SaConfig`] → [`Sa`]), their database ([`SaDb`], published
//! to workers as [`SaTable`] through [`SaReader`]), inbound anti-replay
//! ([`ReplayWindow`]), and ESP encapsulation/decapsulation in place
//! ([`Sa::encrypt`], [`Sa::decrypt`]).
//!
//! How a node uses it, per batch: refresh its `Snapshot<SaTable>`; group
//! packets by SA; outbound, [`Sa::reserve_seq`] for the group (one atomic),
//! then [`Sa::encrypt`] each packet; inbound, [`parse_header`], look the SPI
//! up ([`SaTable::by_spi`]), [`Sa::replay_check`] each packet, then
//! [`Sa::decrypt`] them, then [`Sa::replay_update`]; finally
//! [`Sa::count`] the group's counters once.
//!
//! Crypto: AES-GCM from ring 0.17 (the fastest measured here), AES-CBC and
//! the HMACs from RustCrypto (`aes`, `cbc`, `hmac`, `sha1`, `sha2`; AES-NI
//! and SHA-NI when present). Keys are expanded on an SA's first packet
//! (until then the SA holds its key bytes, zeroizing; [`key_builds`]
//! counts expansions), and an SA's replay window and counter slots are
//! made by its first use: an idle SA is one 128-byte allocation with its
//! `Arc` and its key bytes (see [`sa`]).
//! Known limit: ring's expanded GCM keys and the HMAC states are freed,
//! not zeroized, when an SA goes (those crates offer no hook); the
//! configured key bytes and the AES-CBC schedules are zeroized.
//!
//! Which module says what: [`sa`] (sequence-number ownership, replay
//! sharing, counters), [`esp`] (the packet format and crypto), [`replay`]
//! (the window), [`db`] (publication), [`config`] (names, validation).
#![forbid(unsafe_code)]

pub mod config;
pub mod db;
pub mod esp;
pub mod replay;
pub mod sa;
pub mod table;

pub use config::{Cipher, Integ, Key, Lifetime, MAX_REPLAY_WINDOW, SaConfig, SaError, UdpEncap};
pub use db::{Reason, SaDb, SaEvent, SaEventKind, SaInfo, SaReader, SaTable};
pub use esp::{Decap, EspError, NH_IPV4, NH_IPV6, NH_NONE, icv, is_non_esp_marker, parse_header};
pub use replay::{ReplayError, ReplayWindow};
pub use sa::{Sa, SaCounters, SaState, SeqRange, key_builds};
