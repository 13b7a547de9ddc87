//! Devices under test: how each is set up inside its namespace.
//!
//! Each DUT forwards from `tb-in` to `tb-out` in its own namespace (see
//! [`crate::topology`]). What a scenario asks of the DUT (firewall rules,
//! a full routing table, GRE encapsulation, VLAN) is in [`DutNeeds`]; a DUT
//! that cannot do it says so ([`Setup::NotSupported`]) instead of running
//! something else under the same name.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use serde::Serialize;

use crate::bpf::{FwAction, FwRule, XdpFwd};
use crate::error::{BenchError, Result};
use crate::netns::{Netns, fmt_mac, have_program};
use crate::topology::{
    Chain, DUT_IN, DUT_IN_V4, DUT_IN_V6, DUT_OUT, DUT_OUT_V4, DUT_OUT_V6, GEN_DEV, GEN_V4, SINK_V4, SINK_V6,
    TEST_NET_V4, TEST_NET_V6,
};

/// A kind of device under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DutKind {
    /// tern itself (`tern run --config FILE`), driver "auto" (the XDP
    /// lane where it attaches, else AF_XDP, else AF_PACKET).
    Tern,
    /// tern with lane = "xdp" (forwarding in the driver's XDP hook).
    TernXdp,
    /// tern with lane = "afxdp" (the userspace engine over AF_XDP).
    TernAfxdp,
    /// tern on AF_XDP with a spinning worker that busy-polls the ingress
    /// NAPI (`idle = "spin"`). A veth links no NAPI to its queues, so the
    /// tester teaches tern's helper socket the NAPI id with a few UDP
    /// broadcasts to port 9 from the generator's namespace, and waits for
    /// tern to say busy polling engaged.
    TernAfxdpBusy,
    /// tern on AF_XDP with its default idle = "sleep" and busy polling
    /// while traffic flows: taught the NAPI id as tern-afxdp-busy, the
    /// worker busy-polls under load and hands the NAPI back to the kernel
    /// when it sleeps.
    TernAfxdpAdaptive,
    /// tern with lane = "afpacket" (the userspace engine over AF_PACKET).
    TernAfpacket,
    /// Linux kernel forwarding (ip_forward=1).
    Linux,
    /// Linux with the 50 nftables rules of the 100GE test (VyOS-like).
    LinuxNft,
    /// In-kernel XDP forwarding as a network engineer would write it by
    /// hand (bpf/xdpfwd.bpf.c), native mode on both veths: the scenario's
    /// firewall as a linear list of IPv4 source rules checked in order,
    /// `bpf_fib_lookup` in the DUT namespace's own routes and neighbours
    /// (set up as for `linux`), TTL / hop limit decrement, MAC rewrite,
    /// redirect through a device map; what the lookup does not resolve
    /// goes to the kernel. No GRE, no VLAN.
    XdpFwd,
    /// DPDK testpmd, MAC forwarding over af_packet vdevs (no routing).
    Testpmd,
    /// DPDK testpmd, MAC forwarding over af_xdp vdevs (no routing): DPDK's
    /// own AF_XDP driver, the userspace peer of tern's AF_XDP lane.
    TestpmdAfxdp,
}

impl DutKind {
    /// tern's `driver` for this DUT (None: not tern).
    pub fn tern_driver(self) -> Option<&'static str> {
        match self {
            DutKind::Tern => Some("auto"),
            DutKind::TernXdp => Some("xdp"),
            DutKind::TernAfxdp | DutKind::TernAfxdpBusy | DutKind::TernAfxdpAdaptive => Some("afxdp"),
            DutKind::TernAfpacket => Some("afpacket"),
            _ => None,
        }
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            DutKind::Tern => "tern",
            DutKind::TernXdp => "tern-xdp",
            DutKind::TernAfxdp => "tern-afxdp",
            DutKind::TernAfxdpBusy => "tern-afxdp-busy",
            DutKind::TernAfxdpAdaptive => "tern-afxdp-adaptive",
            DutKind::TernAfpacket => "tern-afpacket",
            DutKind::Linux => "linux",
            DutKind::LinuxNft => "linux-nft",
            DutKind::XdpFwd => "xdp-fwd",
            DutKind::Testpmd => "testpmd",
            DutKind::TestpmdAfxdp => "testpmd-afxdp",
        }
    }

    /// tern with a worker that busy-polls (see [`DutKind::TernAfxdpBusy`]
    /// and [`DutKind::TernAfxdpAdaptive`]): taught the ingress NAPI id, at
    /// normal priority, the ingress NAPI left to tern.
    pub fn busy_polls(self) -> bool {
        matches!(self, DutKind::TernAfxdpBusy | DutKind::TernAfxdpAdaptive)
    }

    /// tern with idle = "spin".
    pub fn spins(self) -> bool {
        self == DutKind::TernAfxdpBusy
    }

    /// DPDK testpmd, over either vdev.
    pub fn is_testpmd(self) -> bool {
        matches!(self, DutKind::Testpmd | DutKind::TestpmdAfxdp)
    }
}

/// The firewall a scenario asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Firewall {
    /// No rules.
    None,
    /// 50 rules `drop src 1.1.N.1`, N = 1..50, default accept (100GE test).
    Drop50,
    /// The same 50 drop rules, then accept the generator's subnet,
    /// default drop (the 100GE drop test).
    Drop50DefaultDeny,
}

/// What the scenario asks of every DUT.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DutNeeds {
    /// Firewall rules.
    pub firewall: Firewall,
    /// A routing table file to load ("prefix" per line, optionally gzip).
    pub route_file: Option<PathBuf>,
    /// Encapsulate every forwarded packet in GRE to the sink.
    pub gre: bool,
    /// Frames arrive tagged with this VLAN id.
    pub vlan: Option<u16>,
}

/// Where the DUT is to run.
#[derive(Debug, Clone, Copy)]
pub struct Placement {
    /// CPU for the DUT's forwarding (worker thread or NAPI thread).
    pub dut_cpu: usize,
    /// SCHED_FIFO priority for the DUT's data path (0: normal).
    pub rt_priority: u8,
}

/// The outcome of setting up a DUT.
pub enum Setup {
    /// Forwarding; dropping the handle stops it.
    Running(DutHandle),
    /// The DUT cannot do what the scenario asks; the reason is reported.
    NotSupported(String),
}

/// A running DUT: a child process (tern, testpmd), an XDP program
/// (xdp-fwd) or nothing (kernel).
pub struct DutHandle {
    child: Option<Child>,
    log: Option<PathBuf>,
    xdp: Option<XdpFwd>,
    /// What was configured, for the report.
    pub description: String,
}

impl DutHandle {
    /// Fails with the DUT's log if its process has exited.
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(c) = &mut self.child
            && let Ok(Some(status)) = c.try_wait()
        {
            return Err(BenchError::Dut(format!("process exited ({status}); log:\n{}", self.log_tail())));
        }
        Ok(())
    }

    /// The DUT's own counters, for the report (xdp-fwd's, summed over
    /// CPUs since it was attached); `None` for DUTs without any.
    pub fn counters(&self) -> Option<String> {
        let x = self.xdp.as_ref()?;
        Some(match x.counters() {
            Ok(c) => format!("xdp-fwd counters over the run: {c}"),
            Err(e) => format!("xdp-fwd counters unreadable: {e}"),
        })
    }

    /// The last lines of the DUT's log, if it has one.
    pub fn log_tail(&self) -> String {
        let Some(p) = &self.log else {
            return String::new();
        };
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for DutHandle {
    fn drop(&mut self) {
        // Detaches the program from both veths.
        drop(self.xdp.take());
        if let Some(mut c) = self.child.take() {
            if let Ok(pid) = i32::try_from(c.id()) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `ip`, run under SCHED_FIFO one below the NAPI threads' priority: the
/// DUT's threads then get their CPU back from other work on the machine,
/// while the kernel's receive processing still preempts them as an
/// interrupt would.
fn rt_command(priority: u8) -> Command {
    if priority > 0 {
        let mut c = Command::new("chrt");
        c.args(["-f", &priority.to_string(), "ip"]);
        c
    } else {
        Command::new("ip")
    }
}

/// The generator's subnet: the drop test's accept rule.
pub const GEN_NET_V4: &str = "10.10.1.0/24";
/// [`GEN_NET_V4`]'s address (a /24).
const GEN_V4_NET: Ipv4Addr = Ipv4Addr::new(10, 10, 1, 0);

/// The 50 source hosts of the 100GE test's rules: 1.1.N.1, N = 1..50.
pub fn rule_sources() -> impl Iterator<Item = String> {
    (1..=50).map(|n| format!("1.1.{n}.1"))
}

/// Sets up `kind` in the chain's DUT namespace.
pub fn setup(
    kind: DutKind,
    chain: &Chain,
    needs: &DutNeeds,
    place: Placement,
    tern_bin: Option<&Path>,
    work_dir: &Path,
) -> Result<Setup> {
    let dut = chain.dut.as_ref().ok_or_else(|| BenchError::Dut("chain without a DUT namespace".into()))?;
    match kind {
        DutKind::Linux | DutKind::LinuxNft | DutKind::XdpFwd => setup_linux(kind, chain, dut, needs, place, work_dir),
        DutKind::Tern
        | DutKind::TernXdp
        | DutKind::TernAfxdp
        | DutKind::TernAfxdpBusy
        | DutKind::TernAfxdpAdaptive
        | DutKind::TernAfpacket => setup_tern(chain, dut, needs, place, tern_bin, work_dir, kind),
        DutKind::Testpmd => setup_testpmd(chain, dut, needs, place, work_dir, "af_packet"),
        DutKind::TestpmdAfxdp => setup_testpmd(chain, dut, needs, place, work_dir, "af_xdp"),
    }
}

fn setup_linux(
    kind: DutKind,
    chain: &Chain,
    dut: &Netns,
    needs: &DutNeeds,
    place: Placement,
    work_dir: &Path,
) -> Result<Setup> {
    if kind == DutKind::XdpFwd {
        if needs.gre {
            return Ok(Setup::NotSupported(
                "xdp-fwd forwards plain IPv4/IPv6 by bpf_fib_lookup: it has no GRE encapsulation".into(),
            ));
        }
        if let Some(v) = needs.vlan {
            return Ok(Setup::NotSupported(format!(
                "xdp-fwd parses untagged Ethernet only: frames tagged with VLAN {v} would go to the kernel"
            )));
        }
    }
    chain.address_dut()?;
    for (k, v) in [
        ("net.ipv4.ip_forward", "1"),
        ("net.ipv6.conf.all.forwarding", "1"),
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
        (&format!("net.ipv4.conf.{DUT_IN}.rp_filter"), "0"),
    ] {
        dut.sysctl(k, v)?;
    }
    let sink_mac = fmt_mac(&chain.sink_link.mac);
    // Static neighbours: the sink is a tester, not a host to resolve.
    dut.ip(&["neigh", "replace", &SINK_V4.to_string(), "lladdr", &sink_mac, "dev", DUT_OUT, "nud", "permanent"])?;
    dut.ip(&["-6", "neigh", "replace", &SINK_V6.to_string(), "lladdr", &sink_mac, "dev", DUT_OUT, "nud", "permanent"])?;
    let mut description = if kind == DutKind::XdpFwd {
        format!(
            "ip_forward=1, XDP program tern_xdpfwd (bpf_fib_lookup, redirect through a device map) in native \
             mode on {DUT_IN} and {DUT_OUT}"
        )
    } else {
        String::from("ip_forward=1")
    };
    if let Some(v) = needs.vlan {
        let sub = format!("{DUT_IN}.{v}");
        if let Err(e) = dut.ip(&["link", "add", "link", DUT_IN, "name", &sub, "type", "vlan", "id", &v.to_string()]) {
            return Ok(Setup::NotSupported(format!("802.1Q VLAN devices unavailable in this kernel ({e})")));
        }
        dut.ip(&["link", "set", &sub, "up"])?;
        description.push_str(&format!(", vlan {v} on {DUT_IN}"));
    }
    if needs.gre {
        let r = dut.ip(&[
            "link",
            "add",
            "gre0",
            "type",
            "gre",
            "local",
            &DUT_OUT_V4.to_string(),
            "remote",
            &SINK_V4.to_string(),
        ]);
        if let Err(e) = r {
            return Ok(Setup::NotSupported(format!("GRE tunnels unavailable in this kernel (no ip_gre module): {e}")));
        }
        dut.ip(&["link", "set", "gre0", "up"])?;
        dut.ip(&["addr", "add", "192.168.255.1/30", "dev", "gre0"])?;
        dut.ip(&["route", "add", TEST_NET_V4, "dev", "gre0"])?;
        description.push_str(", routes via gre0 to 10.10.2.2");
    } else {
        dut.ip(&["route", "add", TEST_NET_V4, "via", &SINK_V4.to_string()])?;
        dut.ip(&["-6", "route", "add", TEST_NET_V6, "via", &SINK_V6.to_string()])?;
    }
    if let Some(file) = &needs.route_file {
        let (n4, n6) = load_linux_routes(dut, file, work_dir)?;
        description.push_str(&format!(", {n4} IPv4 + {n6} IPv6 routes from {}", file.display()));
    }
    if kind == DutKind::LinuxNft {
        let rules = nft_ruleset(needs.firewall);
        let path = work_dir.join(format!("{}-nft.conf", dut.name()));
        write_file(&path, &rules)?;
        dut.exec("nft", &["-f", &path.to_string_lossy()])?;
        description.push_str(match needs.firewall {
            Firewall::None => ", nftables forward chain without rules",
            Firewall::Drop50 => ", nftables: 50 rules `ip saddr 1.1.N.1 drop` in forward, policy accept",
            Firewall::Drop50DefaultDeny => ", nftables: 50 drop rules + accept 10.10.1.0/24 in forward, policy drop",
        });
    } else if kind == DutKind::XdpFwd {
        description.push_str(match needs.firewall {
            Firewall::None => ", no firewall rules (default accept)",
            Firewall::Drop50 => ", firewall in XDP: 50 rules `src 1.1.N.1/32 drop` checked in order, default accept",
            Firewall::Drop50DefaultDeny => {
                ", firewall in XDP: 50 rules `src 1.1.N.1/32 drop` + `src 10.10.1.0/24 accept` checked in order, \
                 default drop"
            }
        });
    } else if needs.firewall != Firewall::None {
        if needs.firewall == Firewall::Drop50DefaultDeny {
            return Ok(Setup::NotSupported("the drop test needs a firewall: see linux-nft".into()));
        }
        description.push_str(", no firewall (the rules are linux-nft's)");
    }
    let xdp = if kind == DutKind::XdpFwd {
        let mut x = XdpFwd::load()?;
        let (rules, default) = xdp_firewall(needs.firewall);
        x.set_firewall(&rules, default)?;
        x.attach(dut, &[DUT_IN, DUT_OUT])?;
        Some(x)
    } else {
        None
    };
    // After the attach: attaching XDP to a veth can give it a new NAPI
    // context, whose thread must be the one pinned and made SCHED_FIFO.
    prepare_ingress(dut, place)?;
    description.push_str(&format!(", {DUT_IN} NAPI thread on cpu {}", place.dut_cpu));
    Ok(Setup::Running(DutHandle { child: None, log: None, xdp, description }))
}

/// Readies the DUT's ingress veth for the generator. Frames sent by XDP
/// reach a veth's peer only through its NAPI, which exists only when GRO or
/// an XDP program is on: GRO on, then the NAPI poll in a kernel thread
/// pinned to the DUT's CPU (as a NIC's interrupt would be), for every DUT
/// alike.
fn prepare_ingress(dut: &Netns, place: Placement) -> Result<()> {
    dut.exec("ethtool", &["-K", DUT_IN, "gro", "on"])?;
    dut.thread_napi(DUT_IN, place.dut_cpu, place.rt_priority)
}

/// The nftables ruleset of the 100GE test, VyOS-like: one rule per
/// blocked source host in the forward hook.
pub fn nft_ruleset(fw: Firewall) -> String {
    let policy = if fw == Firewall::Drop50DefaultDeny { "drop" } else { "accept" };
    let mut s = String::from("table inet tbench {\n  chain forward {\n");
    let _ = writeln!(s, "    type filter hook forward priority 0; policy {policy};");
    if fw != Firewall::None {
        for src in rule_sources() {
            let _ = writeln!(s, "    ip saddr {src} drop");
        }
    }
    if fw == Firewall::Drop50DefaultDeny {
        let _ = writeln!(s, "    ip saddr {GEN_NET_V4} accept");
    }
    s.push_str("  }\n}\n");
    s
}

/// The scenario's firewall as xdp-fwd's rule list and default action:
/// the same rules as [`nft_ruleset`]'s, in the same order.
pub fn xdp_firewall(fw: Firewall) -> (Vec<FwRule>, FwAction) {
    let mut rules = Vec::new();
    if fw != Firewall::None {
        for n in 1..=50u8 {
            let src = Ipv4Addr::new(1, 1, n, 1);
            rules.push(FwRule { src, prefix_len: 32, action: FwAction::Drop });
        }
    }
    if fw == Firewall::Drop50DefaultDeny {
        rules.push(FwRule { src: GEN_V4_NET, prefix_len: 24, action: FwAction::Accept });
        return (rules, FwAction::Drop);
    }
    (rules, FwAction::Accept)
}

/// Reads a route file: one prefix per line, optionally followed by a next
/// hop; `#` comments and blank lines skipped; gzip if named `.gz`.
pub fn read_route_file(path: &Path) -> Result<Vec<String>> {
    use std::io::Read as _;
    let f = std::fs::File::open(path).map_err(|e| BenchError::io(format!("open {}", path.display()), e))?;
    let mut text = String::new();
    let res = if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(f).read_to_string(&mut text)
    } else {
        std::io::BufReader::new(f).read_to_string(&mut text)
    };
    res.map_err(|e| BenchError::io(format!("read {}", path.display()), e))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

fn load_linux_routes(dut: &Netns, file: &Path, work_dir: &Path) -> Result<(usize, usize)> {
    let prefixes = read_route_file(file)?;
    let mut batch = String::with_capacity(prefixes.len() * 40);
    let (mut n4, mut n6) = (0, 0);
    for p in &prefixes {
        if p.contains(':') {
            let _ = writeln!(batch, "-6 route replace {p} via {SINK_V6}");
            n6 += 1;
        } else {
            let _ = writeln!(batch, "route replace {p} via {SINK_V4}");
            n4 += 1;
        }
    }
    let path = work_dir.join(format!("{}-routes.batch", dut.name()));
    write_file(&path, &batch)?;
    // -force: a line the kernel refuses (e.g. a martian) does not stop the rest.
    match dut.ip(&["-force", "-batch", &path.to_string_lossy()]) {
        Ok(_) => {}
        Err(BenchError::Command { .. }) => {} // some lines refused; counted below
        Err(e) => return Err(e),
    }
    let installed = dut.ip(&["route", "show"]).map(|s| s.lines().count()).unwrap_or(0);
    if installed < n4 / 2 {
        return Err(BenchError::Dut(format!("only {installed} of {n4} IPv4 routes from {} installed", file.display())));
    }
    Ok((n4, n6))
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    let mut f = std::fs::File::create(path).map_err(|e| BenchError::io(format!("create {}", path.display()), e))?;
    f.write_all(text.as_bytes()).map_err(|e| BenchError::io(format!("write {}", path.display()), e))
}

/// tern's TOML configuration for a scenario. All of tern's threads on the
/// DUT's CPU (`control_cpus`): tern's default puts its control threads on
/// the CPUs its workers leave, and on this rig that is the generator's and
/// the sink's CPU, where they run at the generator's SCHED_FIFO priority
/// (2026-11-24: tern lost a median of about 4,800 frames at 1.0 Mpps in 8
/// runs that way, against 14 with them on the DUT's CPU; `git show
/// fdbc271:docs/perf/2026-11-24/control-cpus`). What the DUT spends is the DUT's, and stays
/// off the tester's CPU.
pub fn tern_config(needs: &DutNeeds, dut_cpu: usize, driver: &str, spin: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# written by tern-bench rfc2544\n[dataplane]\nworkers = 1\ncpus = [{dut_cpu}]\ncontrol_cpus = [{dut_cpu}]"
    );
    let _ = writeln!(s, "idle = \"{}\"\n", if spin { "spin" } else { "sleep" });
    let acl = match needs.firewall {
        Firewall::None => None,
        _ => Some("FW50"),
    };
    let _ = writeln!(s, "[[interface]]\nname = \"in0\"\ndevice = \"{DUT_IN}\"");
    let _ = writeln!(s, "addresses = [\"{DUT_IN_V4}/24\", \"{DUT_IN_V6}/64\"]\ndriver = \"{driver}\"");
    if let Some(a) = acl {
        let _ = writeln!(s, "acl_in = \"{a}\"");
    }
    let _ = writeln!(s, "\n[[interface]]\nname = \"out0\"\ndevice = \"{DUT_OUT}\"");
    let _ = writeln!(s, "addresses = [\"{DUT_OUT_V4}/24\", \"{DUT_OUT_V6}/64\"]\ndriver = \"{driver}\"\n");
    if needs.gre {
        let _ = writeln!(
            s,
            "[[tunnel]]\nname = \"gre0\"\ntype = \"gre\"\nlocal = \"{DUT_OUT_V4}\"\nremote = \"{SINK_V4}\"\naddresses = [\"192.168.255.1/30\"]\n"
        );
        let _ = writeln!(s, "[[route]]\nprefix = \"{TEST_NET_V4}\"\nvia = \"192.168.255.2\"\n");
    } else {
        let _ = writeln!(s, "[[route]]\nprefix = \"{TEST_NET_V4}\"\nvia = \"{SINK_V4}\"\n");
    }
    let _ = writeln!(s, "[[route]]\nprefix = \"{TEST_NET_V6}\"\nvia = \"{SINK_V6}\"\n");
    if let Some(f) = &needs.route_file {
        let _ = writeln!(s, "[[route_file]]\npath = \"{}\"\nvia = \"{SINK_V4}\"\nvia6 = \"{SINK_V6}\"\n", f.display());
    }
    if let Some(a) = acl {
        let default = if needs.firewall == Firewall::Drop50DefaultDeny { "drop" } else { "accept" };
        let _ = writeln!(s, "[[acl]]\nname = \"{a}\"\ndefault = \"{default}\"\n");
        for src in rule_sources() {
            let _ = writeln!(s, "[[acl.rule]]\naction = \"drop\"\nsrc = \"{src}/32\"\n");
        }
        if needs.firewall == Firewall::Drop50DefaultDeny {
            let _ = writeln!(s, "[[acl.rule]]\naction = \"accept\"\nsrc = \"{GEN_NET_V4}\"\n");
        }
    }
    s
}

fn setup_tern(
    chain: &Chain,
    dut: &Netns,
    needs: &DutNeeds,
    place: Placement,
    tern_bin: Option<&Path>,
    work_dir: &Path,
    kind: DutKind,
) -> Result<Setup> {
    let driver = kind.tern_driver().unwrap_or("auto");
    let busy = kind.busy_polls();
    let bin = match tern_bin {
        Some(b) => b.to_path_buf(),
        None => return Ok(Setup::NotSupported("no tern binary: pass --tern-bin PATH".into())),
    };
    if !bin.is_file() {
        return Err(BenchError::Config(format!("--tern-bin {}: not a file", bin.display())));
    }
    // tern owns the devices: the kernel of the DUT namespace must not
    // forward behind its back.
    dut.sysctl("net.ipv4.ip_forward", "0")?;
    dut.sysctl("net.ipv6.conf.all.forwarding", "0")?;
    prepare_ingress(dut, place)?;
    let cfg = tern_config(needs, place.dut_cpu, driver, kind.spins());
    let cfg_path = work_dir.join(format!("{}-tern.toml", dut.name()));
    write_file(&cfg_path, &cfg)?;
    let log = work_dir.join(format!("{}-tern.log", dut.name()));
    let log_f = std::fs::File::create(&log).map_err(|e| BenchError::io(format!("create {}", log.display()), e))?;
    let log_err = log_f.try_clone().map_err(|e| BenchError::io(format!("dup {}", log.display()), e))?;
    // A busy-polling worker never sleeps: at SCHED_FIFO the kernel's
    // real-time limit (sched_rt_runtime_us, 950000 by default) takes it off
    // its CPU for up to 50 ms a second, and the NAPI it drives goes
    // unserviced (measured: 1.7 % loss at 0.3 Mpps against 0.0 % at normal
    // priority). It runs at normal priority on its pinned CPU instead.
    let prio = if busy { 0 } else { place.rt_priority };
    let child = rt_command(prio)
        .args(["netns", "exec", dut.name()])
        .arg(&bin)
        .args(["run", "--config"])
        .arg(&cfg_path)
        .stdin(Stdio::null())
        .stdout(log_f)
        .stderr(log_err)
        .spawn()
        .map_err(|e| BenchError::Command {
            cmd: format!("ip netns exec {} {} run --config {}", dut.name(), bin.display(), cfg_path.display()),
            detail: e.to_string(),
        })?;
    let mut child = child;
    // Wait until tern has attached to its devices and says it runs: the
    // warm-up's checks of the ingress device (XDP attached? GRO?) must see
    // tern's choice, not the moment before it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if std::fs::read_to_string(&log).is_ok_and(|t| t.contains("tern running")) {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: String =
                tail.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("; ");
            return Err(BenchError::Dut(format!("tern exited at start ({status}): {tail}")));
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BenchError::Dut(format!("tern did not start within 120 s (log {})", log.display())));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let description = if busy {
        if let Err(e) = teach_napi_id(chain, &log, Duration::from_secs(10)) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        format!(
            "{} run --config {} (1 worker on cpu {}, idle = {}, normal priority), busy polling the {DUT_IN} NAPI{}",
            bin.display(),
            cfg_path.display(),
            place.dut_cpu,
            if kind.spins() { "spin" } else { "sleep" },
            if kind.spins() { "" } else { " while traffic flows" }
        )
    } else {
        format!(
            "{} run --config {} (1 worker on cpu {}), {DUT_IN} NAPI thread on cpu {}",
            bin.display(),
            cfg_path.display(),
            place.dut_cpu,
            place.dut_cpu
        )
    };
    Ok(Setup::Running(DutHandle { child: Some(child), log: Some(log), xdp: None, description }))
}

/// What tern logs once a port busy-polls (crates/xdp/src/busy.rs).
const BUSY_ENGAGED: [&str; 2] = ["busy polling through the helper socket", "busy polling on the XSK"];

/// Sends UDP datagrams to 255.255.255.255:9 from the generator's namespace
/// until tern's log says busy polling engaged. A veth links no NAPI to its
/// queues, so the XSK never learns one; tern's helper socket on the ingress
/// device learns it from these (its XDP program passes limited broadcast to
/// the kernel). Checksum offload goes off on the generator's device first: a
/// partial checksum would not survive the veth's XDP path.
fn teach_napi_id(chain: &Chain, log: &Path, within: Duration) -> Result<()> {
    chain.gen_ns.exec("ethtool", &["-K", GEN_DEV, "tx", "off"])?;
    // setns changes the calling thread only: probe from a thread of our own.
    std::thread::scope(|scope| {
        let probe = scope.spawn(|| -> Result<()> {
            chain.gen_ns.enter_current_thread()?;
            let sock = std::net::UdpSocket::bind((GEN_V4, 0)).map_err(|e| BenchError::io("probe socket", e))?;
            sock.set_broadcast(true).map_err(|e| BenchError::io("SO_BROADCAST", e))?;
            let deadline = Instant::now() + within;
            loop {
                sock.send_to(b"tern napi probe", (std::net::Ipv4Addr::BROADCAST, 9))
                    .map_err(|e| BenchError::io("send a NAPI probe", e))?;
                let text = std::fs::read_to_string(log).unwrap_or_default();
                if BUSY_ENGAGED.iter().any(|m| text.contains(m)) {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    return Err(BenchError::Dut(format!(
                        "tern did not start busy polling within {} s of UDP probes (log {})",
                        within.as_secs(),
                        log.display()
                    )));
                }
                // Pacing of the probes; the condition is the log line above.
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        probe.join().map_err(|_| BenchError::Dut("NAPI probe thread panicked".into()))?
    })
}

/// testpmd in MAC forwarding mode over two `vdev` ("af_packet" or
/// "af_xdp") ports, one queue each.
fn setup_testpmd(
    chain: &Chain,
    dut: &Netns,
    needs: &DutNeeds,
    place: Placement,
    work_dir: &Path,
    vdev: &str,
) -> Result<Setup> {
    if !have_program("dpdk-testpmd") {
        return Ok(Setup::NotSupported("dpdk-testpmd not installed (apt-get install dpdk-dev)".into()));
    }
    if needs.firewall != Firewall::None || needs.gre || needs.route_file.is_some() {
        return Ok(Setup::NotSupported("testpmd forwards by MAC only: no firewall, routes or GRE".into()));
    }
    let sink_mac = fmt_mac(&chain.sink_link.mac);
    prepare_ingress(dut, place)?;
    let log = work_dir.join(format!("{}-testpmd.log", dut.name()));
    let log_f = std::fs::File::create(&log).map_err(|e| BenchError::io(format!("create {}", log.display()), e))?;
    let log_err = log_f.try_clone().map_err(|e| BenchError::io(format!("dup {}", log.display()), e))?;
    // testpmd wants a main lcore besides the forwarding one; the main one idles.
    let main_lcore = usize::from(place.dut_cpu == 0);
    let lcores = format!("{main_lcore},{}", place.dut_cpu);
    let args = vec![
        "netns".to_string(),
        "exec".into(),
        dut.name().into(),
        "dpdk-testpmd".into(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        "--no-pci".into(),
        // No shared runtime files: nothing left behind, no clash with
        // another DPDK process (--in-memory conflicts with --no-huge).
        "--no-shconf".into(),
        "-l".into(),
        lcores,
        format!("--vdev=net_{vdev}0,iface={DUT_IN}"),
        format!("--vdev=net_{vdev}1,iface={DUT_OUT}"),
        "--".into(),
        "--forward-mode=mac".into(),
        // The default pool (155k mbufs) does not fit in --no-huge memory.
        "--total-num-mbufs=16384".into(),
        format!("--eth-peer=1,{sink_mac}"),
        "--auto-start".into(),
        "--stats-period=1".into(),
    ];
    let child = rt_command(place.rt_priority)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(log_f)
        .stderr(log_err)
        .spawn()
        .map_err(|e| BenchError::Command { cmd: format!("ip {}", args.join(" ")), detail: e.to_string() })?;
    Ok(Setup::Running(DutHandle {
        child: Some(child),
        log: Some(log),
        xdp: None,
        description: format!("dpdk-testpmd mac forwarding over {vdev} vdevs, lcore {}", place.dut_cpu),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(firewall: Firewall, gre: bool, routes: bool) -> DutNeeds {
        DutNeeds { firewall, route_file: routes.then(|| PathBuf::from("/data/table.txt.gz")), gre, vlan: None }
    }

    #[test]
    fn tern_config_is_valid_toml_with_the_scenario() {
        let t: toml::Value =
            toml::from_str(&tern_config(&needs(Firewall::Drop50, false, true), 1, "auto", false)).expect("toml");
        assert_eq!(t["dataplane"]["cpus"][0].as_integer(), Some(1));
        assert_eq!(t["dataplane"]["control_cpus"][0].as_integer(), Some(1), "tern's threads stay on the DUT's CPU");
        assert_eq!(t["dataplane"]["idle"].as_str(), Some("sleep"));
        let ifs = t["interface"].as_array().expect("interfaces");
        assert_eq!(ifs.len(), 2);
        assert_eq!(ifs[0]["device"].as_str(), Some(DUT_IN));
        assert_eq!(ifs[0]["acl_in"].as_str(), Some("FW50"));
        let acl = &t["acl"][0];
        assert_eq!(acl["default"].as_str(), Some("accept"));
        let rules = acl["rule"].as_array().expect("rules");
        assert_eq!(rules.len(), 50);
        assert_eq!(rules[49]["src"].as_str(), Some("1.1.50.1/32"));
        assert_eq!(t["route_file"][0]["via"].as_str(), Some("10.10.2.2"));
        assert_eq!(t["route_file"][0]["via6"].as_str(), Some("2001:db8:10:2::2"));
        assert!(t.get("tunnel").is_none());

        let t: toml::Value =
            toml::from_str(&tern_config(&needs(Firewall::Drop50DefaultDeny, true, false), 0, "afxdp", true))
                .expect("toml");
        assert_eq!(t["dataplane"]["idle"].as_str(), Some("spin"));
        assert_eq!(t["acl"][0]["default"].as_str(), Some("drop"));
        let rules = t["acl"][0]["rule"].as_array().expect("rules");
        assert_eq!(rules.len(), 51);
        assert_eq!(rules[50]["action"].as_str(), Some("accept"));
        assert_eq!(rules[50]["src"].as_str(), Some("10.10.1.0/24"));
        assert_eq!(t["tunnel"][0]["remote"].as_str(), Some("10.10.2.2"));
        assert_eq!(t["route"][0]["via"].as_str(), Some("192.168.255.2"));

        let t: toml::Value =
            toml::from_str(&tern_config(&needs(Firewall::None, false, false), 1, "afpacket", false)).expect("toml");
        assert!(t.get("acl").is_none());
        assert!(t["interface"][0].get("acl_in").is_none());
    }

    #[test]
    fn nft_ruleset_has_the_100ge_rules() {
        let r = nft_ruleset(Firewall::Drop50);
        assert_eq!(r.matches(" drop\n").count(), 50);
        assert!(r.contains("ip saddr 1.1.1.1 drop") && r.contains("ip saddr 1.1.50.1 drop"));
        assert!(r.contains("policy accept;"));
        let r = nft_ruleset(Firewall::Drop50DefaultDeny);
        assert!(r.contains("policy drop;"));
        assert!(r.find("1.1.50.1 drop").unwrap_or(usize::MAX) < r.find("10.10.1.0/24 accept").unwrap_or(0));
        assert_eq!(nft_ruleset(Firewall::None).matches("saddr").count(), 0);
    }

    /// xdp-fwd's rules are nftables': the 50 sources in order, then the
    /// generator's subnet in the drop test; the same default.
    #[test]
    fn xdp_firewall_is_the_nft_ruleset() {
        let (rules, default) = xdp_firewall(Firewall::None);
        assert!(rules.is_empty());
        assert_eq!(default, FwAction::Accept);
        let (rules, default) = xdp_firewall(Firewall::Drop50);
        assert_eq!(default, FwAction::Accept);
        let srcs: Vec<String> = rules.iter().map(|r| r.src.to_string()).collect();
        assert_eq!(srcs, rule_sources().collect::<Vec<_>>());
        assert!(rules.iter().all(|r| r.prefix_len == 32 && r.action == FwAction::Drop));
        let (rules, default) = xdp_firewall(Firewall::Drop50DefaultDeny);
        assert_eq!(default, FwAction::Drop);
        assert_eq!(rules.len(), 51);
        let last = rules[50];
        assert_eq!(format!("{}/{}", last.src, last.prefix_len), GEN_NET_V4);
        assert_eq!(last.action, FwAction::Accept);
    }

    #[test]
    fn route_file_lines() {
        let dir = std::env::temp_dir().join(format!("tb-routes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("r.txt");
        std::fs::write(&p, "# comment\n1.0.0.0/24\n\n2001:db8::/32 via x\n  10.0.0.0/8  \n").expect("write");
        assert_eq!(read_route_file(&p).expect("read"), ["1.0.0.0/24", "2001:db8::/32", "10.0.0.0/8"]);
        assert!(read_route_file(&dir.join("missing")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
