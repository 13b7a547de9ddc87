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
//!     [--src IPV4 --dst IPV4] [--sports N] [--via bpf|afxdp|afpacket [--rate PPS]]
//! ```
//! `--dsts N`: every stream to N destinations in turn (198.18.0.1 on, the
//! scenario's ports), e.g. frame-sizes with `--dsts 4096` for 4096 flows
//! that repeat.
//! `--srcs N`: every stream from N sources in turn (its own source on),
//! e.g. single-flow-50fw with `--srcs 65536` for source rules that see a
//! new key on every frame (more than the lane's verdict cache holds).
//! `--src`, `--dst`: every stream's first IPv4 source and destination
//! (a rig with addresses of its own). `--sports N`: N UDP source ports
//! from 10000, in turn.
//! `--via afxdp|afpacket`: the same frames built in user space and sent
//! through an AF_XDP socket (queue 0, copy mode) or an AF_PACKET socket
//! (the tester's fallbacks, for kernels that refuse live frames, e.g. a
//! root without CAP_SYS_RESOURCE), as fast as they go or at `--rate`;
//! then the line also says `refused=N` (frames the device refused,
//! counted as sent) and `via=`.
//! Prints `gen pkts=N seconds=S mpps=M` (frames offered, not delivered).

use crate::bpf::{Generator, MAX_PACED_PPS};
use crate::pktgen::PacketGen;
use crate::scenario::ScenarioName;
use crate::traffic::TrafficProfile;
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
    let size = *scenario.sizes.first().ok_or("scenario without frame sizes")?;
    let profile = TrafficProfile { streams: scenario.streams.clone(), size, vlan: None, src_mac, dst_mac };
    let slots = profile.slots().map_err(|e| e.to_string())?;
    let flows: Vec<_> = scenario.streams.iter().map(|s| s.flows).collect();
    // From user space where the kernel refuses live frames (or asked to).
    match arg(args, "--via").unwrap_or("bpf") {
        "bpf" => {}
        via @ ("afxdp" | "afpacket") => {
            let mut g = if via == "afxdp" { PacketGen::af_xdp() } else { PacketGen::af_packet() };
            g.configure(&slots, &flows).map_err(|e| e.to_string())?;
            let rate = num("--rate", MAX_PACED_PPS)?;
            let t0 = Instant::now();
            let (p, st) = g.run_here(dev, rate, u64::MAX, 64, secs).map_err(|e| e.to_string())?;
            let dt = t0.elapsed().as_secs_f64();
            println!(
                "gen pkts={} seconds={dt:.3} mpps={:.3} refused={} via={via}",
                p.sent,
                p.sent as f64 / dt / 1e6,
                st.refused
            );
            return Ok(());
        }
        via => return Err(format!("--via {via}: bpf, afxdp or afpacket")),
    }
    let mut g = Generator::load().map_err(|e| e.to_string())?;
    g.anchor(&format!("tlanegen{}", std::process::id())).map_err(|e| e.to_string())?;
    g.configure(&slots, &flows).map_err(|e| e.to_string())?;
    let ifindex = tern_xdp::lane::device_ifindex(dev).map_err(|e| e.to_string())?;
    let buf = vec![0u8; profile.max_frame_len()];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while t0.elapsed() < secs {
        g.send(ifindex, &buf, chunk, batch).map_err(|e| e.to_string())?;
        sent += u64::from(chunk);
    }
    let dt = t0.elapsed().as_secs_f64();
    println!("gen pkts={sent} seconds={dt:.3} mpps={:.3}", sent as f64 / dt / 1e6);
    Ok(())
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
