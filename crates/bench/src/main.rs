//! `tern-bench`: the engine, FIB and control-plane benchmarks and the RFC
//! 2544 tester, apart from the router (`tern` links none of it).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

// The router's global allocator (`tern_intrin::alloc`), so that
// `tern-bench engine` measures the product's heap (mimalloc on huge pages).
tern_intrin::global_allocator!();

type Res = Result<ExitCode, String>;

/// tern's laboratory: benchmarks and the RFC 2544 tester.
#[derive(Parser)]
#[command(name = "tern-bench", version)]
struct Cli {
    #[command(subcommand)]
    cmd: BenchCmd,
}

fn main() -> ExitCode {
    match run(Cli::parse().cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tern-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Subcommand)]
enum BenchCmd {
    /// The full forwarding graph on memory ports, one worker on one core.
    Engine(EngineArgs),
    /// FIB load, lookup, update and gap figures for a route table, against
    /// references (a crate trie, the Linux kernel).
    Fib(FibArgs),
    /// RFC 2544 throughput (NDR/PDR) and frame-loss tests of tern against
    /// Linux, Linux + nftables and DPDK testpmd, in network namespaces on
    /// this machine; prints the table, writes JSON and an HTML report.
    Rfc2544(tern_bench::Rfc2544Opts),
    /// Control-plane figures: FPM ingest of a full table, FPM decoding
    /// alone, a kernel table dumped over netlink, a worker's stalls during
    /// an ingest (no selection: all four).
    Control(ControlArgs),
    /// The XDP lane program's own cost per packet (BPF_PROG_TEST_RUN), the
    /// 100GE scenarios' packets on tern's tables (options: see
    /// crates/bench/src/rig/lane.rs; needs root).
    Lane(Words),
    /// The rigs' generator: one scenario's streams out of a device, flat
    /// out, for a while (BPF_PROG_TEST_RUN live frames).
    Gen(Words),
    /// The rigs' sink: counts the generator's frames arriving on a device.
    Sink(Words),
    /// The in-kernel reference XDP forwarder (the xdp-fwd DUT) on a rig's
    /// router devices, until killed.
    XdpFwd(Words),
    /// The least an AF_XDP forwarder does (MAC rewrite) on tern's driver.
    XskFwd(Words),
    /// The full table through FRR into tern over FPM and the convergence
    /// test (withdraw and re-advertise on the primary), tern against Linux
    /// in the same run, in the lab of scripts/frr/lab.sh (root, frr, bird2).
    Convergence(tern_bench::convergence::ConvergenceArgs),
    /// The failover gap through a VRRP virtual address when the master
    /// dies: keepalived over Linux and over tern (AF_PACKET and XDP lanes),
    /// tern's own VRRPv3; at 100 ms and 10 ms (root, keepalived).
    Failover(tern_bench::failover::FailoverArgs),
    /// IKEv2 setup rate: many IKE SAs from tern's own initiator against a
    /// responder (strongSwan's charon, or `--respond`: tern's engine as a
    /// bare responder); setups/s, retransmissions, failures.
    Ike(tern_bench::ike::IkeArgs),
}

/// A rig tool's options, passed on as they are (`--key value` words; see
/// the tool's source under crates/bench/src/rig/).
#[derive(Args)]
struct Words {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Args)]
struct ControlArgs {
    /// Route table, one prefix per line (.gz accepted).
    #[arg(long, env = "TERN_FULL_TABLE", default_value = "../shared/data/full-table-2025.txt.gz")]
    table: PathBuf,
    /// Runs per figure; the median is reported.
    #[arg(long, env = "TERN_RUNS", default_value_t = 3)]
    runs: usize,
    /// The table over TCP into the FPM server and the FIB.
    #[arg(long)]
    fpm_ingest: bool,
    /// The same stream through the decoder and route translation only.
    #[arg(long)]
    decode: bool,
    /// The IPv4 table in a throwaway namespace's kernel, dumped into the kernel mirror (root).
    #[arg(long)]
    netlink_dump: bool,
    /// A SCHED_FIFO worker on CPU 1 forwarding while CPU 0 ingests the table (two CPUs).
    #[arg(long)]
    worker_stalls: bool,
    /// Print JSON instead of lines.
    #[arg(long)]
    json: bool,
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
    /// Load this route table and send to random covered destinations (and
    /// use it for the 900k-routes-50fw scenario).
    #[arg(long)]
    routes: Option<PathBuf>,
    /// Scenarios to measure after plain forwarding, comma-separated, or
    /// "all": plain6 (one UDP/IPv6 flow), single-flow-50fw,
    /// single-flow-50fw-out (its rules on the output interface),
    /// single-flow6-50fw (plain6 with 50 IPv6 rules), single-flow6-50fw-out,
    /// multi-flow6-50fw
    /// (the same with 1024 flows), gre,
    /// gre-multi-flow, 900k-routes-50fw, drop-test, acl-10k,
    /// ipsec-encrypt-gcm, ipsec-encrypt-cbc (AES-128-CBC + HMAC-SHA1-96),
    /// ipsec-decrypt-gcm, ipsec-decrypt-cbc (--size is the inner frame's:
    /// 1436 for the seed's 1418-byte payload).
    #[arg(long, value_delimiter = ',')]
    scenario: Vec<String>,
    /// Pin to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Measure exactly this many packets per setup instead of --seconds
    /// (for instruction counts: valgrind --tool=callgrind tern-bench engine --packets 1000000).
    #[arg(long)]
    packets: Option<u64>,
    /// Workers, each pinned to its own CPU (from --cpu, default 0, upwards) with its own memory ports;
    /// the tables are shared as in the router. Mpps is their sum.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: u16,
    /// Frames at 2048-byte strides (the AF_XDP UMEM layout) instead of padded by a cache line.
    #[arg(long)]
    unpadded_pool: bool,
    /// The IPsec scenarios install this many more SAs beside the two they
    /// use (e.g. 2000000: the tables of a million tunnels).
    #[arg(long, default_value_t = 0)]
    extra_sas: u32,
    /// The IPsec scenarios spread their packets over this many SAs (remote-access clients of a
    /// multipoint tunnel, shuffled): a sample spaced evenly over --extra-sas (raised to at least
    /// this many), every one of which is a client; 0: the one tunnel's SA. --extra-sas 0 against
    /// --extra-sas 1000000 with the same --spread: K SAs' traffic with K or a million installed.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=4_000_000))]
    spread: u32,
    /// With --spread: frames in a row on each SA before the next (a tunnel's burst; 1: every
    /// packet on another SA).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    burst: u32,
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

fn run(b: BenchCmd) -> Res {
    match b {
        BenchCmd::Engine(a) => bench_engine(a),
        BenchCmd::Fib(a) => bench_fib(a),
        BenchCmd::Rfc2544(o) => bench_rfc2544(&o),
        BenchCmd::Control(a) => bench_control(a),
        BenchCmd::Lane(w) => Ok(tern_bench::rig::lane::main(&w.args)),
        BenchCmd::Gen(w) => Ok(tern_bench::rig::generator::main(&w.args)),
        BenchCmd::Sink(w) => Ok(tern_bench::rig::sink::main(&w.args)),
        BenchCmd::XdpFwd(w) => Ok(tern_bench::rig::xdp_fwd::main(&w.args)),
        BenchCmd::XskFwd(w) => Ok(tern_bench::rig::xsk_fwd::main(&w.args)),
        BenchCmd::Convergence(a) => tern_bench::convergence::run(&a).map(|()| ExitCode::SUCCESS),
        BenchCmd::Failover(a) => tern_bench::failover::run(&a).map(|()| ExitCode::SUCCESS),
        BenchCmd::Ike(a) => tern_bench::ike::run(&a).map(|()| ExitCode::SUCCESS),
    }
}

fn bench_control(a: ControlArgs) -> Res {
    let opts = tern_bench::control::ControlOpts {
        table: a.table,
        runs: a.runs,
        fpm_ingest: a.fpm_ingest,
        decode: a.decode,
        netlink_dump: a.netlink_dump,
        worker_stalls: a.worker_stalls,
    };
    let mut report = tern_bench::control::run(&opts)?;
    report.command = std::env::args().collect::<Vec<_>>().join(" ");
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_engine(a: EngineArgs) -> Res {
    if !(64..=1518).contains(&a.size) {
        return Err(format!("--size {}: need 64..=1518", a.size));
    }
    use tern_bench::engine::Scenario;
    let mut scenarios = Vec::new();
    for s in &a.scenario {
        if s == "all" {
            scenarios.extend(Scenario::ALL);
            continue;
        }
        scenarios.push(Scenario::parse(s).ok_or_else(|| {
            let names: Vec<_> = Scenario::ALL.iter().map(|s| s.name()).collect();
            format!("unknown scenario {s:?}; known: {}", names.join(", "))
        })?);
    }
    let opts = tern_bench::engine::EngineBenchOpts {
        seconds: a.seconds,
        flows: a.flows,
        frame_len: a.size - 4,
        routes: a.routes,
        cpu: a.cpu,
        scenarios,
        packets: a.packets,
        workers: usize::from(a.workers),
        pad_frames: !a.unpadded_pool,
        extra_sas: a.extra_sas,
        spread: a.spread,
        burst: a.burst,
    };
    let mut report = tern_bench::engine::run(&opts)?;
    report.command = std::env::args().collect::<Vec<_>>().join(" ");
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_fib(a: FibArgs) -> Res {
    let opts = tern_bench::fib::BenchOpts {
        table: a.table,
        lookups: a.lookups,
        churn: a.churn,
        kernel: !a.no_kernel,
        references: !a.no_references,
        ..tern_bench::fib::BenchOpts::default()
    };
    let report = tern_bench::fib::run(&opts)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?);
    } else {
        print!("{report}");
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_rfc2544(opts: &tern_bench::Rfc2544Opts) -> Res {
    let mut bar = tern_bench::StderrBar::default();
    let report = tern_bench::run(opts, &mut |p| bar.draw(&p)).map_err(|e| e.to_string())?;
    eprintln!("{}", bar.finish());
    if opts.json {
        println!("{}", report.to_json());
    } else {
        println!("{report}");
    }
    if let Some(path) = &opts.html {
        report.write_html(path).map_err(|e| e.to_string())?;
        eprintln!("report written to {}", path.display());
    }
    // A DUT that failed (not one that cannot run the scenario) fails the
    // run, after the report is out.
    let failed: Vec<&str> =
        report.all().filter(|d| d.status == tern_bench::report::DutStatus::Failed).map(|d| d.name.as_str()).collect();
    if !failed.is_empty() {
        eprintln!("tern-bench: failed: {}", failed.join(", "));
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
