//! `tern-xdp`: inspect and clean up XDP programs on an interface.
//!
//! ```text
//! tern-xdp status IFACE          programs attached to IFACE (mode, id, name)
//! tern-xdp detach IFACE [--force] remove a stale tern steering program
//!                                (--force: whatever program is attached)
//! ```
//! A tern that exits or crashes detaches its program itself when it was
//! attached through a bpf_link; this is for programs attached by netlink
//! (older kernels, other tools) that outlive their loader.

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!("usage: tern-xdp status IFACE | tern-xdp detach IFACE [--force]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(cmd), Some(ifname)) = (args.first(), args.get(1)) else {
        return usage();
    };
    let force = args.iter().skip(2).any(|a| a == "--force");
    match cmd.as_str() {
        "status" => match tern_xdp::attached(ifname) {
            Ok(v) if v.is_empty() => {
                println!("{ifname}: no XDP program");
                ExitCode::SUCCESS
            }
            Ok(v) => {
                for (mode, id, name) in v {
                    println!("{ifname}: {mode:?} mode, program id {id}, name {name:?}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tern-xdp: {e}");
                ExitCode::FAILURE
            }
        },
        "detach" => match tern_xdp::remove_stale(ifname, force) {
            Ok(ids) if ids.is_empty() => {
                println!(
                    "{ifname}: nothing to detach{}",
                    if force { "" } else { " (no tern program; --force removes any)" }
                );
                ExitCode::SUCCESS
            }
            Ok(ids) => {
                println!("{ifname}: detached program(s) {ids:?}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tern-xdp: {e}");
                ExitCode::FAILURE
            }
        },
        _ => usage(),
    }
}
