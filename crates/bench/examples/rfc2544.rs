//! `tern bench rfc2544` without the tern binary, for developing the tester:
//!
//! ```text
//! cargo run --release -p tern-bench --example rfc2544 -- \
//!     --scenario single-flow-50fw --dut linux,linux-nft --trial-secs 5 --html report.html
//! ```
use clap::Parser;
use tern_bench::{Rfc2544Opts, StderrBar};

#[derive(Parser)]
#[command(about = "RFC 2544 tests against tern and Linux")]
struct Cli {
    #[command(flatten)]
    opts: Rfc2544Opts,
}

fn main() {
    let cli = Cli::parse();
    let mut bar = StderrBar::default();
    let report = match tern_bench::run(&cli.opts, &mut |p| bar.draw(&p)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("\nerror: {e}");
            std::process::exit(1);
        }
    };
    eprintln!();
    if cli.opts.json {
        println!("{}", report.to_json());
    } else {
        println!("{report}");
    }
    if let Some(path) = &cli.opts.html {
        if let Err(e) = report.write_html(path) {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
        eprintln!("HTML report: {}", path.display());
    }
    // As `tern bench rfc2544`: a DUT that failed fails the run.
    if report.all().any(|d| d.status == tern_bench::report::DutStatus::Failed) {
        eprintln!("error: a DUT failed (see the report)");
        std::process::exit(1);
    }
}
