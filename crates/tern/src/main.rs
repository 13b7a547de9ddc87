//! The `tern` command: the daemon, the lab demo, the benchmarks and (over
//! the API) the operator's CLI.
#![forbid(unsafe_code)]

mod lab;
mod netns;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// tern: a software router fast path for Linux.
#[derive(Parser)]
#[command(name = "tern", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, global = true, default_value = "info")]
    log: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the router in the foreground from a configuration file.
    Run(RunArgs),
    /// Build a throwaway network-namespace lab (host1 - tern - host2), run
    /// tern in it with a built-in configuration, and show that it routes.
    Lab(lab::LabArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Configuration files.
    #[command(subcommand)]
    Config(ConfigCmd),
}

#[derive(Args)]
struct RunArgs {
    /// The configuration file (TOML; see docs/CONFIG.md).
    #[arg(short, long)]
    config: PathBuf,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// The full forwarding graph on memory ports, one worker on one core.
    Engine(EngineArgs),
    /// FIB load, lookup, update and gap figures for a route table, against
    /// references (a crate trie, the Linux kernel).
    Fib(FibArgs),
}

#[derive(Args)]
struct EngineArgs {
    /// Measured seconds (after 1 s of warm-up).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Distinct flows (destination addresses).
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Frame size on the wire, with FCS (64..=1518).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Load this route table and send to random covered destinations.
    #[arg(long)]
    routes: Option<PathBuf>,
    /// Pin to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct FibArgs {
    /// Route table, one prefix per line (.gz accepted).
    #[arg(long, default_value = "../shared/data/full-table-2025.txt.gz")]
    table: PathBuf,
    /// Lookups per figure.
    #[arg(long, default_value_t = 20_000_000)]
    lookups: usize,
    /// Routes deleted and re-added for the update-rate figures.
    #[arg(long, default_value_t = 200_000)]
    churn: usize,
    /// Skip the Linux kernel reference.
    #[arg(long)]
    no_kernel: bool,
    /// Skip the crate-trie reference.
    #[arg(long)]
    no_references: bool,
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Validate a configuration file and print what it defines.
    Check { file: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(&cli.log)).init();
    let r = match cli.cmd {
        Cmd::Run(a) => run(a),
        Cmd::Lab(a) => lab::run(a),
        Cmd::Bench(BenchCmd::Engine(a)) => bench_engine(a),
        Cmd::Bench(BenchCmd::Fib(a)) => bench_fib(a),
        Cmd::Config(ConfigCmd::Check { file }) => config_check(&file),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tern: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res = Result<ExitCode, String>;

fn run(a: RunArgs) -> Res {
    let plan = tern_control::config::load(&a.config).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| format!("signal handler: {e}"))?;
    }
    let mut router = tern_control::router::Router::start(plan).map_err(|e| e.to_string())?;
    log::info!("tern running (config {}); Ctrl-C or SIGTERM stops it", a.config.display());
    router.run(&stop);
    log::info!("shutting down");
    router.shutdown();
    Ok(ExitCode::SUCCESS)
}

fn config_check(file: &std::path::Path) -> Res {
    let plan = tern_control::config::load(file).map_err(|e| e.to_string())?;
    println!(
        "{}: ok: {} interface(s), {} static route(s), {} route file(s), {} ACL rule set(s), {} worker(s)",
        file.display(),
        plan.ifaces.len(),
        plan.routes.len(),
        plan.route_files.len(),
        plan.acls.len(),
        plan.config.dataplane.workers
    );
    Ok(ExitCode::SUCCESS)
}

fn bench_engine(a: EngineArgs) -> Res {
    if !(64..=1518).contains(&a.size) {
        return Err(format!("--size {}: need 64..=1518", a.size));
    }
    let opts = tern_control::engine_bench::EngineBenchOpts {
        seconds: a.seconds,
        flows: a.flows,
        frame_len: a.size - 4,
        routes: a.routes,
        cpu: a.cpu,
    };
    let mut report = tern_control::engine_bench::run(&opts)?;
    report.command = std::env::args().collect::<Vec<_>>().join(" ");
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_fib(a: FibArgs) -> Res {
    let opts = tern_fib::bench::BenchOpts {
        table: a.table,
        lookups: a.lookups,
        churn: a.churn,
        kernel: !a.no_kernel,
        references: !a.no_references,
        ..tern_fib::bench::BenchOpts::default()
    };
    let report = tern_fib::bench::run(&opts)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}
