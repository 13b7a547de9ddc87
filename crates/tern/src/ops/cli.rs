//! The operator's commands, `tern <noun> <verb>`, as clap definitions.
//! The same definitions parse one-shot command lines, shell lines and
//! batch files.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Nouns of the CLI. Each talks to a running tern over its API socket,
/// except `config check`.
#[derive(Subcommand, Debug, Clone)]
pub enum OpCmd {
    /// Version, uptime, interface/worker counts, FIB size.
    Status,
    /// Interfaces: state, addresses, MTU, counters; set up/down/mtu.
    #[command(
        visible_alias = "iface",
        after_help = "Examples:\n  tern interface show\n  tern interface set lan0 down\n  tern interface set wan0 up mtu 1400"
    )]
    Interface(NounArgs<InterfaceCmd>),
    /// IPv4/IPv6 addresses of interfaces (with their connected routes).
    #[command(
        visible_alias = "addr",
        after_help = "Examples:\n  tern address show lan0\n  tern address add 10.0.9.1/24 dev lan0\n  tern address del 10.0.9.1/24 dev lan0"
    )]
    Address(NounArgs<AddressCmd>),
    /// Routes: show the RIB, get the route to an address, add and delete.
    #[command(
        after_help = "Examples:\n  tern route show\n  tern route get 198.51.100.7\n  tern route add 203.0.113.0/24 via 10.0.2.2\n  tern route add 192.0.2.0/24 blackhole\n  tern route del 203.0.113.0/24\n  tern route summary"
    )]
    Route(NounArgs<RouteCmd>),
    /// ARP and ND neighbours.
    #[command(visible_aliases = ["neighbour", "neigh"])]
    Neighbor(NounArgs<ShowOnly>),
    /// tern's own VRRP groups: state, priority, master, counters.
    #[command(after_help = "Examples:\n  tern vrrp show")]
    Vrrp(NounArgs<ShowOnly>),
    /// Per node (calls, packets, packets/call, cycles and ns per packet),
    /// per interface and per drop reason counters.
    #[command(after_help = "Examples:\n  tern stats show\n  tern stats show errors --all\n  tern stats clear")]
    Stats(NounArgs<StatsCmd>),
    /// Worker threads: load, idle time, batch sizes.
    Worker(NounArgs<ShowOnly>),
    /// The forwarding graph: nodes and their next nodes.
    #[command(after_help = "Examples:\n  tern graph show\n  tern graph dot | dot -Tsvg > graph.svg")]
    Graph(NounArgs<GraphCmd>),
    /// Firewall rule sets with per-rule hit counters; load new rules live.
    #[command(after_help = "Examples:\n  tern acl show\n  tern acl load edge.toml")]
    Acl(NounArgs<AclCmd>),
    /// Packet traces: the path and decisions of the next N packets.
    #[command(after_help = "Examples:\n  tern trace start 10\n  tern trace show\n  tern trace clear")]
    Trace(NounArgs<TraceCmd>),
    /// Write an interface's frames to a pcap file (tshark/wireshark read it).
    #[command(
        after_help = "Examples:\n  tern capture lan0 -w lan0.pcap -c 100\n  tern capture wan0 --direction tx -w - | tshark -r -"
    )]
    Capture(CaptureArgs),
    /// Configuration: check a file, reload the running one, show it.
    #[command(
        after_help = "Examples:\n  tern config check /etc/tern/tern.toml\n  tern config reload\n  tern config show"
    )]
    Config(NounArgs<ConfigCmd>),
    /// The forwarding nodes: switch their fast paths live (to bisect a
    /// suspected fast-path bug; `tern status` shows them).
    #[command(
        after_help = "Examples:\n  tern dataplane fastpaths off\n  tern dataplane fastpaths off acl_shortcut\n  tern dataplane fastpaths on"
    )]
    Dataplane(NounArgs<DataplaneCmd>),
    /// IPsec: security associations (add, delete, show with counters) and
    /// the ipsec tunnels.
    #[command(
        after_help = "Examples:\n  tern ipsec sa show\n  tern ipsec sa show 10\n  tern ipsec sa add --file sas.toml\n  tern ipsec sa add id 30 spi 0x3001 crypto aes-128-gcm key 0x... esn\n  tern ipsec sa del 30 31\n  tern ipsec tunnel show"
    )]
    Ipsec(NounArgs<IpsecCmd>),
    /// IKEv2: the IKE SAs and their child SAs, the `[[ike]]` peers;
    /// initiate and terminate.
    #[command(
        after_help = "Examples:\n  tern ike sa show\n  tern ike peer show\n  tern ike initiate branch\n  tern ike terminate branch\n  tern ike terminate branch 3"
    )]
    Ike(NounArgs<IkeCmd>),
    /// An interactive shell with completion and history.
    Shell,
}

/// A noun's verb; the noun alone means `show`.
#[derive(Args, Debug, Clone)]
pub struct NounArgs<T: Subcommand> {
    #[command(subcommand)]
    pub verb: Option<T>,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ShowOnly {
    /// Show them.
    #[command(visible_aliases = ["list", "ls"])]
    Show,
}

#[derive(Subcommand, Debug, Clone)]
pub enum InterfaceCmd {
    /// Show all interfaces, or one.
    #[command(visible_aliases = ["list", "ls"])]
    Show { name: Option<String> },
    /// Change an interface: `up`, `down`, `mtu N` (in any combination).
    Set {
        name: String,
        /// up | down | mtu N
        #[arg(required = true, num_args = 1..)]
        settings: Vec<String>,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum AddressCmd {
    /// Show the addresses of all interfaces, or of one.
    #[command(visible_aliases = ["list", "ls"])]
    Show { interface: Option<String> },
    /// Add ADDRESS/LEN to an interface: `ADDRESS/LEN dev IFACE`.
    Add {
        /// ADDRESS/LEN dev IFACE
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Remove an address: `ADDRESS[/LEN] dev IFACE`.
    #[command(visible_alias = "delete")]
    Del {
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum RouteCmd {
    /// Show routes (every source; `*` marks the one in use).
    #[command(visible_aliases = ["list", "ls"])]
    Show {
        /// Only routes inside this prefix.
        prefix: Option<String>,
        /// Only routes of this source (connected, local, static, config,
        /// kernel, fpm, api, neighbor, ike).
        #[arg(long)]
        source: Option<String>,
        /// At most this many routes.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// The route a packet to ADDRESS takes, and its next hop.
    Get { address: String },
    /// Add a route: `PREFIX via GW [dev IFACE] [distance N] [metric N]`,
    /// `PREFIX dev IFACE`, or `PREFIX blackhole|unreachable|prohibit`.
    Add {
        /// Add the routes of FILE (`-`: standard input), one per line in
        /// the words above, in batches of 5000, each all or nothing.
        #[arg(long, short = 'f', value_name = "FILE", conflicts_with = "words")]
        file: Option<PathBuf>,
        #[arg(required_unless_present = "file", num_args = 1..)]
        words: Vec<String>,
    },
    /// Remove a route added over the API: `PREFIX [source api|static]`.
    #[command(visible_alias = "delete")]
    Del {
        /// Remove the api routes of FILE (`-`: standard input), one
        /// PREFIX per line, in batches of 5000, each all or nothing.
        #[arg(long, short = 'f', value_name = "FILE", conflicts_with_all = ["prefix", "words"])]
        file: Option<PathBuf>,
        #[arg(required_unless_present = "file")]
        prefix: Option<String>,
        #[arg(num_args = 0..)]
        words: Vec<String>,
    },
    /// FIB sizes and update counters.
    Summary,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum StatsPart {
    All,
    Nodes,
    Interfaces,
    Errors,
}

#[derive(Subcommand, Debug, Clone)]
pub enum StatsCmd {
    /// Show counters (since `stats clear`, if it ran).
    #[command(visible_aliases = ["list", "ls"])]
    Show {
        #[arg(value_enum, default_value = "all")]
        part: StatsPart,
        /// Include nodes and counters that are zero.
        #[arg(long)]
        all: bool,
    },
    /// Start `stats show` from zero (metrics keep counting).
    Clear,
}

#[derive(Subcommand, Debug, Clone)]
pub enum GraphCmd {
    /// Nodes and their next nodes.
    #[command(visible_aliases = ["list", "ls"])]
    Show,
    /// The graph in Graphviz dot syntax.
    Dot,
}

#[derive(Subcommand, Debug, Clone)]
pub enum AclCmd {
    /// Rule sets, their rules and hit counters.
    #[command(visible_aliases = ["list", "ls"])]
    Show { name: Option<String> },
    /// Load `[[acl]]` rule sets from a TOML file: each replaces the running
    /// set of its name (compiled and swapped atomically) or is added, and
    /// is bound to the interfaces `--in` / `--out` name for it.
    Load {
        file: PathBuf,
        /// Bind a set of the file as an interface's input rule set
        /// (`IFACE=SET`, repeatable), in the same step as the set is loaded.
        #[arg(long = "in", value_name = "IFACE=SET")]
        bind_in: Vec<String>,
        /// Bind a set of the file as an interface's output rule set
        /// (`IFACE=SET`, repeatable).
        #[arg(long = "out", value_name = "IFACE=SET")]
        bind_out: Vec<String>,
    },
    /// Translate an nftables ruleset (the JSON of `nft -j list ruleset`,
    /// `-` for stdin) into tern `[[acl]]` rule sets, printed as TOML: one per
    /// base chain, with the chains it jumps to inlined. Only the stateless
    /// subset is accepted; anything else is refused naming the table, chain,
    /// rule handle and expression. Needs no running tern.
    #[command(name = "import-nft")]
    ImportNft {
        file: PathBuf,
        /// `ct state` matches: `refuse` (the default) or `stateless`, an
        /// approximation (established: TCP with ACK or RST; related: ICMP
        /// errors; new: TCP SYN without ACK or another protocol; invalid:
        /// never). tern keeps no connection state: read docs/CLI.md first.
        #[arg(long, value_name = "MODE", default_value = "refuse")]
        ct: tern_acl::nft::CtMode,
    },
}

#[derive(Subcommand, Debug, Clone)]
pub enum TraceCmd {
    /// Trace the next N packets (earlier results are cleared).
    Start { count: u32 },
    /// Show the traced packets.
    #[command(visible_aliases = ["list", "ls"])]
    Show,
    /// Forget the traced packets.
    Clear,
    /// Stop marking packets.
    Stop,
}

#[derive(Args, Debug, Clone)]
pub struct CaptureArgs {
    /// The interface to capture.
    pub target: String,
    /// The pcap file to write ("-": standard output).
    #[arg(short = 'w', long = "write")]
    pub file: PathBuf,
    /// Stop after this many frames.
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// rx, tx or both.
    #[arg(long, default_value = "both")]
    pub direction: String,
    /// Bytes kept of each frame.
    #[arg(short = 's', long, default_value_t = 65535)]
    pub snaplen: u32,
    /// Stop after this many seconds.
    #[arg(long)]
    pub seconds: Option<f64>,
}

#[derive(Subcommand, Debug, Clone)]
pub enum ConfigCmd {
    /// Validate a configuration file and print what it defines (no daemon needed).
    Check { file: PathBuf },
    /// Re-read the running tern's configuration file and apply the
    /// differences live (changes that need a restart are refused).
    Reload,
    /// The running configuration, live changes included.
    Show,
}

#[derive(Subcommand, Debug, Clone)]
pub enum DataplaneCmd {
    /// Fast paths on or off: all, or one of direct, acl_shortcut,
    /// gre_direct (`[dataplane.fast_paths]`; a reload sets them from the
    /// file again).
    #[command(visible_alias = "fast-paths")]
    Fastpaths { state: OnOff, name: Option<String> },
}

#[derive(Subcommand, Debug, Clone)]
pub enum IpsecCmd {
    /// Security associations.
    Sa(NounArgs<IpsecSaCmd>),
    /// The ipsec tunnels, their SAs and traffic.
    Tunnel(NounArgs<ShowOnly>),
}

#[derive(Subcommand, Debug, Clone)]
pub enum IkeCmd {
    /// The IKE SAs (every engine thread's) with their child SAs.
    Sa(NounArgs<IkeSaCmd>),
    /// The `[[ike]]` peers: configuration (no keys) and SA counts.
    Peer(NounArgs<ShowOnly>),
    /// Starts an IKE SA (and its child SA) with a peer.
    Initiate { peer: String },
    /// Deletes a peer's IKE SAs and their child SAs, or one IKE SA by id.
    Terminate { peer: String, id: Option<u64> },
}

#[derive(Subcommand, Debug, Clone)]
pub enum IkeSaCmd {
    /// The counts by state, then a page of IKE SAs by id (the next page:
    /// `--after` the last id shown, as the last line says).
    #[command(visible_aliases = ["list", "ls"])]
    Show(IkeSaShowOpts),
    /// Every IKE SA counted by state, in all and per peer.
    Summary,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct IkeSaShowOpts {
    /// Only IKE SAs with a larger id (the last id of the previous page).
    #[arg(long)]
    pub after: Option<u64>,
    /// At most this many (0: all, which at a million SAs is a lot).
    #[arg(long, default_value_t = IKE_SA_PAGE)]
    pub limit: usize,
    /// Only this `[[ike]]` peer's.
    #[arg(long)]
    pub peer: Option<String>,
    /// Only those with this remote (peer) address.
    #[arg(long)]
    pub remote: Option<String>,
    /// Only the one holding this virtual IP (remote access).
    #[arg(long, visible_alias = "virtual-ip")]
    pub vip: Option<String>,
}

/// IKE SAs a page of `tern ike sa show` lists unless told.
pub const IKE_SA_PAGE: usize = 100;

#[derive(Subcommand, Debug, Clone)]
pub enum IpsecSaCmd {
    /// The SAs (or one) without keys: algorithms, state, sequence numbers,
    /// counters.
    #[command(visible_aliases = ["list", "ls"])]
    Show {
        id: Option<u32>,
        /// At most this many SAs.
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Installs SAs, all or nothing: from a file of `[[ipsec_sa]]` entries
    /// (keys stay out of the shell's history), or one SA given as words,
    /// the keys of `[[ipsec_sa]]`: id N spi X crypto C [integ I] key 0x..
    /// [integ_key 0x..] [esn] [replay_window N] [udp_encap] [udp_src_port
    /// P] [udp_dst_port P] [soft_packets|soft_bytes|soft_secs|hard_packets|
    /// hard_bytes|hard_secs N].
    Add {
        #[arg(long)]
        file: Option<PathBuf>,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Removes SAs by id (not one a configured tunnel uses).
    #[command(visible_alias = "delete")]
    Del {
        #[arg(required = true)]
        ids: Vec<u32>,
    },
}

#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum OnOff {
    On,
    Off,
}

/// A line of the interactive shell or of a batch file.
#[derive(Parser, Debug)]
#[command(name = "tern", no_binary_name = true, disable_version_flag = true)]
pub struct Line {
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub cmd: OpCmd,
}
