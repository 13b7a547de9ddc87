//! Command-line options of `tern-bench rfc2544` (clap derive; the
//! `tern-bench` binary flattens them into its subcommand).

use std::path::PathBuf;

use clap::Args;

use crate::dut::DutKind;
use crate::pktgen::GeneratorKind;
use crate::scenario::ScenarioName;

/// How the flow fields of successive frames are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FlowMode {
    /// Walk every combination in order (destination port fastest).
    Sequential,
    /// Draw every field at random.
    Random,
}

/// RFC 2544 throughput and frame-loss tests against tern and Linux.
#[derive(Debug, Clone, Args)]
pub struct Rfc2544Opts {
    /// Scenario preset.
    #[arg(long, value_enum, default_value = "single-flow-50fw")]
    pub scenario: ScenarioName,

    /// Devices under test, comma separated, measured one after the other
    /// with the same traffic.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "tern,linux,linux-nft")]
    pub dut: Vec<DutKind>,

    /// The tern binary to test (default: `tern` in this program's directory).
    #[arg(long)]
    pub tern_bin: Option<PathBuf>,

    /// Offered loads of the frame-loss test in Mpps, comma separated
    /// (default: 10, 25, 50, 75 and 100 % of the generator's ceiling).
    #[arg(long, value_delimiter = ',')]
    pub loads: Vec<f64>,

    /// Frame sizes instead of the scenario's: 64..1518, 78v6.., imix1/2/3.
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<String>,

    /// Destination addresses per stream, consecutive from 198.18.0.1
    /// (overrides the scenario's flows).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub dst_count: Option<u32>,

    /// Source addresses of the legitimate streams, consecutive from
    /// 10.10.1.2 (they must stay inside 10.10.1.0/24 for the drop test).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=250))]
    pub src_count: Option<u32>,

    /// UDP source ports and destination ports per stream, each from 1024.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64000))]
    pub ports: Option<u16>,

    /// How flows vary from frame to frame.
    #[arg(long, value_enum)]
    pub flow_mode: Option<FlowMode>,

    /// Tag every frame with this 802.1Q VLAN id.
    #[arg(long)]
    pub vlan: Option<u16>,

    /// Length of one trial in seconds (RFC 2544 asks for 60).
    #[arg(long, default_value_t = 10.0)]
    pub trial_secs: f64,

    /// Longest wait for in-flight frames after a trial, in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub drain_secs: f64,

    /// Search goal width, as a fraction of the highest rate.
    #[arg(long, default_value_t = 0.01)]
    pub goal_width: f64,

    /// Highest rate to search or offer, Mpps (default: the ceiling).
    #[arg(long)]
    pub max_mpps: Option<f64>,

    /// Traffic generator: `bpf` is the XDP program run by
    /// BPF_PROG_TEST_RUN with live frames (fastest); `afxdp` and
    /// `afpacket` send the same frames from user space through an AF_XDP
    /// or an AF_PACKET socket (slower; they work where the kernel refuses
    /// the former, e.g. root without CAP_SYS_RESOURCE); `auto` tries `bpf`,
    /// then `afxdp`, then `afpacket`, saying so on stderr and in the report.
    #[arg(long, value_enum, default_value = "auto")]
    pub generator: GeneratorKind,

    /// Depth of the generator's token bucket in microseconds: the longest
    /// burst it sends at its own speed after falling behind. Deeper reaches
    /// higher rates with fewer system calls but is burstier.
    #[arg(long, default_value_t = 500.0)]
    pub bucket_us: f64,

    /// Trials per load in the NDR/PDR searches (odd): a load meets a target
    /// when most of its trials do (MLRsearch's goal exceed ratio 0.5, RFC
    /// 9971). 1 is RFC 2544's search: one lossy trial fails the load.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=9))]
    pub trials_per_load: u8,

    /// Skip the NDR/PDR searches (frame-loss test only).
    #[arg(long)]
    pub no_search: bool,

    /// CPU of the generator thread.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,

    /// CPU of the DUT (its worker, or the kernel's NAPI thread).
    #[arg(long, default_value_t = 1)]
    pub dut_cpu: usize,

    /// CPU of the sink's NAPI thread.
    #[arg(long, default_value_t = 0)]
    pub sink_cpu: usize,

    /// SCHED_FIFO priority of the generator and the DUT process (NAPI
    /// threads get one more), so other work on the machine does not share
    /// their CPUs (0: normal scheduling).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=98))]
    pub rt_priority: u8,

    /// Let the DUT's and the sink's CPUs enter idle states during the run
    /// (by default they only poll when idle: PM QoS resume latency n/a).
    #[arg(long)]
    pub allow_idle: bool,

    /// Leave other tasks on the DUT's (and a separate sink's) CPU. By
    /// default every task that may also run elsewhere is moved off it for
    /// the run and put back after (per-CPU kernel threads stay).
    #[arg(long)]
    pub no_isolate: bool,

    /// Watch the DUT's CPU for holes with a timer pinned to it that ticks
    /// every this many microseconds (0: off). A tick that comes late means
    /// the CPU ran nothing (on a VM: the host did not run it). Each trial
    /// reports its holes.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub hole_watch_us: u32,

    /// Judge the searches' trials by the frames lost outside host holes:
    /// frames the sink saw missing right after a hole in the DUT CPU's time
    /// longer than the DUT's 256-frame receive ring lasts at the offered
    /// rate (any DUT loses frames there) do not fail a trial. Not RFC 2544,
    /// which counts every frame (the default); every trial still reports
    /// all it lost and how many of them in holes.
    #[arg(long)]
    pub excuse_host_holes: bool,

    /// Routing table for 900k-routes-50fw (one prefix per line, .gz ok).
    #[arg(long)]
    pub route_file: Option<PathBuf>,

    /// Print the report as JSON instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Write the HTML report here.
    #[arg(long)]
    pub html: Option<PathBuf>,

    /// Directory for DUT configs and logs (default: a new one in /tmp).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
}
