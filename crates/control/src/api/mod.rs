//! The control API: a typed, versioned request/response protocol over a
//! unix socket ([`proto`]), the server the daemon runs ([`server`]), the
//! client the CLI uses ([`client`]) and the daemon's control loop that
//! ties the router, the API, metrics and reloads together ([`daemon`]).

pub mod client;
pub mod daemon;
pub mod proto;
pub mod server;
pub mod slots;
pub mod types;

pub use proto::*;
