//! The `tern` command: the daemon, the lab demo and (over the API) the
//! operator's CLI. The benchmarks and the RFC 2544 tester are `tern-bench`
//! (crates/bench), which this binary does not link.
#![forbid(unsafe_code)]

// Every `print!`/`println!` of this crate (defined before the modules, so
// they see these) writes through `stdout_fmt`: a reader that went away
// (`tern route show | head -1`) ends tern quietly instead of a panic.
macro_rules! print {
    ($($t:tt)*) => { $crate::stdout_fmt(format_args!($($t)*)) };
}
macro_rules! println {
    () => { $crate::stdout_fmt(format_args!("\n")) };
    ($($t:tt)*) => { $crate::stdout_fmt(format_args!("{}\n", format_args!($($t)*))) };
}

// mimalloc rather than glibc's malloc, its heap on transparent huge pages:
// the same declaration as tern-bench's (`tern_intrin::alloc`: why).
tern_intrin::global_allocator!();

mod lab;
mod ops;

use clap::{Args, CommandFactory, Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// tern: a software router fast path for Linux.
///
/// `tern run` starts the router; the other commands talk to a running
/// one over its API socket. `tern` alone opens an interactive shell;
/// `tern -f FILE` runs the commands in FILE. docs/CLI.md (installed:
/// /usr/share/doc/tern/CLI.md) lists every command with an example.
#[derive(Parser)]
#[command(name = "tern", version, about, propagate_version = true)]
struct Cli {
    /// Log level (error, warn, info, debug, trace); RUST_LOG overrides.
    #[arg(long, global = true, default_value = "info")]
    log: String,
    /// The running tern's API socket (default /run/tern/tern.sock). With
    /// `run` and `lab`: where tern listens, over the configuration's
    /// `[api] socket`.
    #[arg(long, global = true, env = "TERN_SOCKET")]
    socket: Option<PathBuf>,
    /// Print answers as JSON; an error is then `{"ok": false, "error":
    /// {"code": ..., "message": ...}}` on standard output (exit status 1).
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
    /// Put back the device settings (sysctls, offloads, link state, NAPI
    /// settings, XDP programs) that a tern which did not stop cleanly left
    /// in this network namespace, from its state file (`ip netns exec NS
    /// tern cleanup` for another namespace). A running tern's are left
    /// alone.
    Cleanup(CleanupArgs),
    /// Moved: the benchmarks and the RFC 2544 tester are the `tern-bench`
    /// binary. Kept, hidden, to say so instead of clap's generic error.
    #[command(hide = true, disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Print a completion script for SHELL (bash, zsh, fish, elvish,
    /// powershell): `tern completions bash > /etc/bash_completion.d/tern`.
    Completions {
        /// The shell to complete in.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (tern.1, tern-route.1, tern-route-add.1, ...):
    /// one per command, made from the same definitions as `--help`.
    Man {
        /// Write every page into DIR (created if missing); without it,
        /// print tern.1 to standard output (`tern man | man -l -`).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// A live view of a running tern: interfaces, nodes of both lanes,
    /// drop reasons, workers, FIB and the XDP lane, in rates per second.
    /// Keys: q quit, Tab/1-5 pane, s sort, r reverse, / filter, z zero
    /// rows, +/- refresh, p pause. Plain text (or --json) of one interval
    /// when standard output is not a terminal, or with --once.
    #[command(
        after_help = "Examples:\n  tern top\n  tern top --interval 500 --filter ip4\n  tern top --once --json | jq .interfaces"
    )]
    Top(ops::top::TopArgs),
    #[command(flatten)]
    Op(ops::cli::OpCmd),
}

#[derive(Args)]
struct RunArgs {
    /// The configuration file (TOML; see docs/CONFIG.md).
    #[arg(short, long)]
    config: PathBuf,
}

#[derive(Args)]
struct CleanupArgs {
    /// The state directory (default: $TERN_STATE_DIR, else /run/tern/host).
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(&cli.log)).init();
    let socket = cli.socket.clone().unwrap_or_else(|| PathBuf::from(tern_control::config::DEFAULT_SOCKET));
    let mut ctx = ops::Ctx::new(socket.clone(), cli.json);
    if cli.file.is_some() && cli.cmd.is_some() {
        return fail(&ctx, "-f FILE runs the commands in FILE; give no command with it");
    }
    let r = match cli.cmd {
        Some(Cmd::Run(a)) => run(a, cli.socket),
        Some(Cmd::Lab(a)) => lab::run(a, &socket),
        Some(Cmd::Cleanup(a)) => cleanup(a),
        Some(Cmd::Bench { args }) => {
            eprintln!("tern bench moved to its own binary: tern-bench {}", args.join(" "));
            Ok(ExitCode::from(2))
        }
        Some(Cmd::Completions { shell }) => completions(shell),
        Some(Cmd::Man { dir }) => man(dir.as_deref()),
        Some(Cmd::Top(a)) => ops::top::run(&mut ctx, &a, cli.json),
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
        Err(e) => fail(&ctx, &e),
    }
}

/// Reports a failed command: `tern: MESSAGE` on standard error, or with
/// `--json` the error object on standard output.
fn fail(ctx: &ops::Ctx, e: &str) -> ExitCode {
    if ctx.json {
        print!("{}", ops::json_error(ctx.last_code(), e.trim_end()));
    } else {
        eprintln!("tern: {}", e.trim_end());
    }
    ExitCode::FAILURE
}

/// Writes to standard output. A closed pipe ends tern at once with
/// success (the reader has what it wanted, as with `head`); any other
/// write error ends it with a message and failure.
pub fn stdout_fmt(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        exit_on_write_error(&e);
    }
}

/// The end of tern after standard output failed.
pub fn exit_on_write_error(e: &std::io::Error) -> ! {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    eprintln!("tern: writing to standard output: {e}");
    std::process::exit(1);
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

fn cleanup(a: CleanupArgs) -> Res {
    use tern_control::linux::saved;
    let dir = a.state_dir.unwrap_or_else(saved::state_dir);
    let c = saved::restore_leftovers(&dir)?;
    for r in &c.restored {
        println!("restored {r}");
    }
    for (f, pid) in &c.running {
        println!("left alone: {} (tern pid {pid} is running)", f.display());
    }
    if c.files.is_empty() && c.failed.is_empty() {
        println!("nothing to restore in {} for this network namespace", dir.display());
    } else if !c.files.is_empty() {
        println!("{} state file(s) restored and removed", c.files.len());
    }
    if c.failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(format!("could not restore everything:\n  {}", c.failed.join("\n  ")))
    }
}

/// `tern completions SHELL`: the script clap_complete makes from the
/// command tree, so it always completes the commands this binary has.
fn completions(shell: clap_complete::Shell) -> Res {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "tern", &mut out);
    print!("{}", String::from_utf8_lossy(&out));
    Ok(ExitCode::SUCCESS)
}

/// `tern man [--dir DIR]`: the man pages clap_mangen makes from the
/// command tree (the packages install them; docs/CLI.md has the examples).
fn man(dir: Option<&std::path::Path>) -> Res {
    let cmd = Cli::command();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut out).map_err(|e| format!("man page: {e}"))?;
        print!("{}", String::from_utf8_lossy(&out));
        return Ok(ExitCode::SUCCESS);
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    clap_mangen::generate_to(cmd, dir).map_err(|e| format!("writing man pages into {}: {e}", dir.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// `tern run`: `socket` (the global `--socket` or `TERN_SOCKET`) overrides
/// the configuration's `[api] socket`.
fn run(a: RunArgs, socket: Option<PathBuf>) -> Res {
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
    let opts =
        tern_control::api::daemon::DaemonOptions { config_path: Some(config_path), socket, ..Default::default() };
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
