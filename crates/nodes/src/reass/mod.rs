//! Reassembly of IP fragments addressed to the router.
pub mod table;
