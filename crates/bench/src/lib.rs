//! tern's laboratory: the `tern-bench` binary (`src/main.rs`) with the
//! engine benchmark ([`engine`]), the FIB benchmark against reference tries
//! ([`fib`]) and the RFC 2544 tester. None of it is linked into `tern`.
//!
//! The RFC 2544 tester: an XDP traffic generator (AF_XDP or AF_PACKET
//! from user space where the kernel refuses it) and receiver, the
//! NDR/PDR searches and the frame-loss test, DUTs in network namespaces
//! (tern, Linux, Linux + nftables, hand-written XDP forwarding, DPDK
//! testpmd), and reports (table, JSON, HTML with SVG charts). See README.md
//! for the design and figures.
//!
//! `tern-bench rfc2544` runs it:
//!
//! ```no_run
//! # fn demo(opts: &tern_bench::Rfc2544Opts) -> tern_bench::Result<()> {
//! let mut bar = tern_bench::StderrBar::default();
//! let report = tern_bench::run(opts, &mut |p| bar.draw(&p))?;
//! if opts.json { println!("{}", report.to_json()) } else { println!("{report}") }
//! if let Some(path) = &opts.html { report.write_html(path)? }
//! # Ok(()) }
//! ```
//!
//! No unsafe code: maps are exchanged as byte arrays, namespaces and CPU
//! affinity go through `nix`, BPF through `aya`.
#![forbid(unsafe_code)]

pub mod account;
pub mod bpf;
pub mod control;
pub mod convergence;
pub mod dut;
pub mod engine;
pub mod error;
pub mod failover;
pub mod fib;
pub mod html;
pub mod ike;
pub mod netns;
pub mod opts;
pub mod pcap;
pub mod pktgen;
mod poptrie;
#[cfg(test)]
mod poptrie_tests;
pub mod progress;
pub mod report;
pub mod rig;
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
