//! The `tern` command: the daemon, the lab demo, the benchmarks and (over
//! the API) the operator's CLI.
#![forbid(unsafe_code)]

mod bench_cmd;
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
    Bench(bench_cmd::BenchCmd),
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
        Cmd::Bench(b) => bench_cmd::run(b),
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

pub type Res = Result<ExitCode, String>;

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

