//! `tern-bench xdp-fwd`: the lab's one in-kernel reference XDP forwarder
//! (bpf/xdpfwd.bpf.c, the RFC 2544 tester's `xdp-fwd` DUT) attached to a
//! rig's router devices: bpf_fib_lookup in the namespace's own tables,
//! TTL / hop limit, MAC rewrite, redirect through a device map; its
//! firewall empty and accepting (`--rules` is the tester's business).
//!
//! ```text
//! ip netns exec RTR tern-bench xdp-fwd --dev r0 --dev r1
//! ```
//! Attaches (native mode) to every `--dev` of the calling namespace, makes
//! each a redirect target, prints `xdp-fwd attached to r0 r1` and holds
//! them until it is killed (the kernel detaches the programs with the
//! process's links).

use super::Args;
use crate::bpf::XdpFwd;
use std::process::ExitCode;

fn run(a: &Args) -> Result<(), String> {
    let devs = a.all("--dev");
    if devs.is_empty() {
        return Err("--dev missing".into());
    }
    let mut f = XdpFwd::load().map_err(|e| e.to_string())?;
    let ifindexes = devs
        .iter()
        .map(|d| tern_xdp::lane::device_ifindex(d).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    f.add_ports_here(&ifindexes).map_err(|e| e.to_string())?;
    for d in &devs {
        f.attach_here(d).map_err(|e| e.to_string())?;
    }
    println!("xdp-fwd attached to {}", devs.join(" "));
    loop {
        // Until killed: nothing to do but hold the links.
        std::thread::park();
    }
}

/// `tern-bench xdp-fwd ARGS...` (the options above).
pub fn main(args: &[String]) -> ExitCode {
    match run(&Args(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern-bench xdp-fwd: {e}");
            ExitCode::FAILURE
        }
    }
}
