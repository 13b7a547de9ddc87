//! tern's control plane: the configuration, the router that assembles
//! workers, ports, the FIB and the nodes, and the neighbour table.
#![forbid(unsafe_code)]

pub mod afxdp;
pub mod api;
pub mod commands;
pub mod config;
pub mod esp_kernel;
pub mod ike;
pub mod ike_local;
pub mod interfaces;
pub mod ipsec;
pub mod lanes;
pub mod linux;
pub mod metrics;
pub mod neighbor;
pub mod progress;
pub mod reload;
pub mod router;
pub mod routes;
pub mod source;
pub mod stats;
pub mod xdplane;

// The router's own modules, at the paths they have always had.
pub use router::{ifset, links, live};
