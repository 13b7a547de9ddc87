//! The `tern` command: the daemon, the lab demo, the benchmarks and (over
//! the API) the operator's CLI.
#![forbid(unsafe_code)]

mod bench_cmd;
mod lab;
mod netns;
mod ops;

use clap::{Args, Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// tern: a software router fast path for Linux.
///
/// `tern run` starts the router; the other commands talk to a running
/// one over its API socket. `tern` alone opens an interactive shell;
/// `tern -f FILE` runs the commands in FILE. docs/CLI.md lists every
/// command with an example.
#[derive(Parser)]
#[command(name = "tern", version, about, propagate_version = true)]
struct Cli {
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, global = true, default_value = "info")]
    log: String,
    /// The running tern's API socket.
    #[arg(long, global = true, env = "TERN_SOCKET", default_value = tern_control::config::DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Print answers as JSON.
    #[arg(long, global = true)]
    json: bool,
    /// Run the commands in FILE, one per line ("-": standard input).
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    file: Option<PathBuf>,
    /// With -f: stop at the first command that fails.
    #[arg(short = 'e', long = "stop-on-error", requires = "file")]
    stop_on_error: bool,
    #[command(subcommand)]
    cmd: Option<Cmd>,
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
    #[command(flatten)]
    Op(ops::cli::OpCmd),
}

#[derive(Args)]
struct RunArgs {
    /// The configuration file (TOML; see docs/CONFIG.md).
    #[arg(short, long)]
    config: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(&cli.log)).init();
    let mut ctx = ops::Ctx::new(cli.socket.clone(), cli.json);
    if cli.file.is_some() && cli.cmd.is_some() {
        eprintln!("tern: -f FILE runs the commands in FILE; give no command with it");
        return ExitCode::FAILURE;
    }
    let r = match cli.cmd {
        Some(Cmd::Run(a)) => run(a),
        Some(Cmd::Lab(a)) => lab::run(a, &cli.socket),
        Some(Cmd::Bench(b)) => bench_cmd::run(b),
        Some(Cmd::Op(ops::cli::OpCmd::Shell)) => ops::shell::interactive(&mut ctx),
        Some(Cmd::Op(op)) => ops::execute(&mut ctx, &op, cli.json).map(|out| {
            print!("{out}");
            ExitCode::SUCCESS
        }),
        None => match &cli.file {
            Some(f) => ops::shell::batch(&mut ctx, f, cli.stop_on_error),
            None if std::io::stdin().is_terminal() => ops::shell::interactive(&mut ctx),
            None => ops::shell::batch(&mut ctx, std::path::Path::new("-"), cli.stop_on_error),
        },
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tern: {}", e.trim_end());
            ExitCode::FAILURE
        }
    }
}

pub type Res = Result<ExitCode, String>;

/// Tells systemd (Type=notify) that tern is ready or stopping; nothing
/// when not started by systemd.
fn sd_notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else { return };
    let bytes = path.as_encoded_bytes();
    let r = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name).and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), &path)
    };
    if let Err(e) = r {
        log::warn!("sd_notify {state}: {e}");
    }
}

fn run(a: RunArgs) -> Res {
    let plan = tern_control::config::load_for_run(&a.config).map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| format!("signal handler: {e}"))?;
    }
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, Arc::clone(&hup))
        .map_err(|e| format!("signal handler: {e}"))?;
    let mut router = tern_control::router::Router::start(plan).map_err(|e| e.to_string())?;
    let config_path = std::fs::canonicalize(&a.config).unwrap_or_else(|_| a.config.clone());
    let opts = tern_control::api::daemon::DaemonOptions { config_path: Some(config_path), ..Default::default() };
    let mut daemon = match tern_control::api::daemon::Daemon::start(&router, opts) {
        Ok(d) => d,
        Err(e) => {
            router.shutdown();
            return Err(e);
        }
    };
    log::info!(
        "tern running (config {}, API {}); SIGHUP reloads, Ctrl-C or SIGTERM stops",
        a.config.display(),
        daemon.socket().display()
    );
    sd_notify("READY=1");
    daemon.run(&mut router, &stop, &hup);
    sd_notify("STOPPING=1");
    log::info!("shutting down");
    drop(daemon);
    router.shutdown();
    Ok(ExitCode::SUCCESS)
}
