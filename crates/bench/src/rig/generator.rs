//! `tern-bench gen`: the lab's one generator for the veth rigs
//! (`scripts/lane_rig.sh`, `scripts/xsk_rig.sh`): the RFC 2544 tester's XDP
//! generator (varying flows in the program, BPF_PROG_TEST_RUN live frames)
//! sending one scenario's streams out of a device, as fast as it can, for a
//! while. Its frames carry the tester's signature, which `tern-bench sink`
//! counts.
//!
//! ```text
//! tern-bench gen --dev g0 --scenario drop-test --dst-mac 02:..:10 --src-mac 02:..:11 \
//!     [--seconds 8] [--cpu 0] [--chunk 16384] [--batch 64] [--dsts N] [--srcs N] \
//!     [--src IPV4 --dst IPV4] [--sports N] [--size BYTES] [--generator auto|bpf|afxdp|afpacket [--rate PPS]]
//! ```
//! `--dsts N`: every stream to N destinations in turn (198.18.0.1 on, the
//! scenario's ports), e.g. frame-sizes with `--dsts 4096` for 4096 flows
//! that repeat.
//! `--srcs N`: every stream from N sources in turn (its own source on),
//! e.g. single-flow-50fw with `--srcs 65536` for source rules that see a
//! new key on every frame (more than the lane's verdict cache holds).
//! `--src`, `--dst`: every stream's first IPv4 source and destination
//! (a rig with addresses of its own). `--sports N`: N UDP source ports
//! from 10000, in turn. `--size`: every frame this size (FCS included)
//! instead of the scenario's first. `--generator`: the XDP program
//! (`bpf`), or the same frames built in user space and sent through an
//! AF_XDP socket (`afxdp`, copy mode) or AF_PACKET (`afpacket`); `auto`
//! (the default) falls back from bpf to afxdp to afpacket where the kernel
//! refuses one (BPF_PROG_TEST_RUN's live frames need CAP_SYS_RESOURCE),
//! saying so on stderr. `--via` is another name for `--generator`. `--rate`:
//! the user-space generators' pace (as fast as they go by default); they
//! also print `refused=N` (frames the device refused, counted as sent).
//! Prints `gen pkts=N seconds=S mpps=M generator=KIND` (frames offered,
//! not delivered).

use crate::bpf::{Generator, MAX_PACED_PPS};
use crate::pktgen::PacketGen;
use crate::scenario::ScenarioName;
use crate::traffic::{FrameSize, TrafficProfile};
use clap::ValueEnum;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn arg<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    args.iter().position(|a| a == key).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// Option `key`'s count of 1 or more, if given.
fn count(args: &[String], key: &str) -> Result<Option<u32>, String> {
    arg(args, key)
        .map(|n| n.parse::<u32>().ok().filter(|&n| n >= 1).ok_or(format!("{key} {n}: need a count of 1 or more")))
        .transpose()
}

fn run(args: &[String]) -> Result<(), String> {
    let dev = arg(args, "--dev").ok_or("--dev missing")?;
    let name = arg(args, "--scenario").unwrap_or("single-flow-50fw");
    let sc = ScenarioName::from_str(name, true).map_err(|e| format!("--scenario {name}: {e}"))?;
    let dst_mac = super::parse_mac(arg(args, "--dst-mac").ok_or("--dst-mac missing")?)?;
    let src_mac = super::parse_mac(arg(args, "--src-mac").ok_or("--src-mac missing")?)?;
    let num = |k: &str, d: f64| arg(args, k).map_or(Ok(d), |s| s.parse::<f64>().map_err(|e| format!("{k}: {e}")));
    let secs = Duration::from_secs_f64(num("--seconds", 8.0)?);
    let chunk = num("--chunk", 16384.0)? as u32;
    let batch = num("--batch", 64.0)? as u32;
    if let Some(cpu) = arg(args, "--cpu") {
        let cpu = cpu.parse::<usize>().map_err(|e| format!("--cpu: {e}"))?;
        tern_xdp::pin_thread_to_cpu(cpu).map_err(|e| format!("pin to cpu {cpu}: {e}"))?;
    }
    let mut scenario = sc.expand(None);
    if let Some(n) = count(args, "--dsts")? {
        for st in &mut scenario.streams {
            st.flows.dst_count = n;
            st.flows.dst_stride = 1;
        }
    }
    if let Some(n) = count(args, "--srcs")? {
        for st in &mut scenario.streams {
            st.flows.src_count = n;
            st.flows.src_stride = 1;
        }
    }
    if let Some(n) = count(args, "--sports")? {
        let n = u16::try_from(n).map_err(|_| format!("--sports {n}: at most 65535"))?;
        for st in &mut scenario.streams {
            st.flows.sport_base = 10000;
            st.flows.sport_count = n.min(u16::MAX - 10000);
        }
    }
    let addr = |k: &str| {
        arg(args, k).map(|s| s.parse::<std::net::Ipv4Addr>().map_err(|e| format!("{k} {s}: {e}"))).transpose()
    };
    if let Some(a) = addr("--src")? {
        scenario.streams.iter_mut().for_each(|st| st.src4 = a);
    }
    if let Some(a) = addr("--dst")? {
        scenario.streams.iter_mut().for_each(|st| st.dst4 = a);
    }
    let size = match arg(args, "--size") {
        Some(n) => FrameSize::Fixed {
            size: n.parse::<u16>().ok().filter(|n| (64..=9018).contains(n)).ok_or(format!("--size {n}: 64..=9018"))?,
            ipv6: false,
        },
        None => *scenario.sizes.first().ok_or("scenario without frame sizes")?,
    };
    let profile = TrafficProfile { streams: scenario.streams.clone(), size, vlan: None, src_mac, dst_mac };
    let slots = profile.slots().map_err(|e| e.to_string())?;
    let flows: Vec<_> = scenario.streams.iter().map(|s| s.flows).collect();
    let kind = arg(args, "--generator").or_else(|| arg(args, "--via")).unwrap_or("auto");
    let rate = num("--rate", MAX_PACED_PPS)?;
    let mut order: Vec<&str> = match kind {
        "auto" => vec!["bpf", "afxdp", "afpacket"],
        "bpf" | "afxdp" | "afpacket" => vec![kind],
        _ => return Err(format!("--generator {kind}: auto, bpf, afxdp or afpacket")),
    };
    let mut last = String::new();
    let mut refused = None;
    for k in order.drain(..) {
        let t0 = Instant::now();
        let sent = match k {
            "bpf" => send_bpf(dev, &slots, &flows, &profile, secs, chunk, batch),
            _ => {
                let mut g = if k == "afxdp" { PacketGen::af_xdp() } else { PacketGen::af_packet() };
                g.configure(&slots, &flows).map_err(|e| e.to_string()).and_then(|()| {
                    g.run_here(dev, rate, u64::MAX, 256, secs)
                        .map(|(p, st)| {
                            refused = Some(st.refused);
                            p.sent
                        })
                        .map_err(|e| e.to_string())
                })
            }
        };
        match sent {
            Ok(sent) => {
                let dt = t0.elapsed().as_secs_f64();
                let refused = refused.map(|r| format!(" refused={r}")).unwrap_or_default();
                println!(
                    "gen pkts={sent} seconds={dt:.3} mpps={:.3} generator={k} via={k}{refused}",
                    sent as f64 / dt / 1e6
                );
                return Ok(());
            }
            Err(e) if kind == "auto" => {
                eprintln!("tern-bench gen: the {k} generator failed ({e}); trying the next");
                last = e;
            }
            Err(e) => return Err(e),
        }
    }
    Err(format!("no generator works here; the last: {last}"))
}

/// The XDP generator (BPF_PROG_TEST_RUN live frames) for `secs`: frames
/// offered.
fn send_bpf(
    dev: &str,
    slots: &[crate::traffic::Slot],
    flows: &[crate::traffic::FlowSpec],
    profile: &TrafficProfile,
    secs: Duration,
    chunk: u32,
    batch: u32,
) -> Result<u64, String> {
    let mut g = Generator::load().map_err(|e| e.to_string())?;
    g.anchor(&format!("tlanegen{}", std::process::id())).map_err(|e| e.to_string())?;
    g.configure(slots, flows).map_err(|e| e.to_string())?;
    let ifindex = tern_xdp::lane::device_ifindex(dev).map_err(|e| e.to_string())?;
    let buf = vec![0u8; profile.max_frame_len()];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < secs {
        g.send(ifindex, &buf, chunk, batch).map_err(|e| e.to_string())?;
        sent += u64::from(chunk);
    }
    Ok(sent)
}

/// `tern-bench gen ARGS...` (the options above).
pub fn main(args: &[String]) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern-bench gen: {e}");
            ExitCode::FAILURE
        }
    }
}
