//! Traffic generator, RFC 2544 searches and reports
#![forbid(unsafe_code)]

pub mod account;
pub mod bpf;
pub mod dut;
pub mod error;
pub mod html;
pub mod netns;
pub mod opts;
pub mod pcap;
pub mod progress;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod search;
pub mod topology;
pub mod traffic;
pub mod trial;

pub use error::{BenchError, Result};
pub use opts::Rfc2544Opts;
pub use progress::{Progress, StderrBar};
pub use report::Report;
pub use runner::run;
