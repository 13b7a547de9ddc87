//! Traffic generator, RFC 2544 searches and reports
#![forbid(unsafe_code)]

pub mod account;
pub mod bpf;
pub mod dut;
pub mod error;
pub mod netns;
pub mod search;
pub mod topology;
pub mod traffic;
pub mod trial;

pub use error::{BenchError, Result};
