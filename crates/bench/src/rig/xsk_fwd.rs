//! `tern-bench xsk-fwd`: the least an AF_XDP forwarder does, on tern's own
//! AF_XDP driver: the floor under the userspace lane in the rigs.
//!
//! ```text
//! tern-bench xsk-fwd --in r0 --out r1 --dst-mac 02:00:00:00:00:21 --src-mac 02:00:00:00:00:20 \
//!     [--local 10.77.1.1]... [--busy-poll on|off] [--cpu 1] [--warmup 2] [--seconds 5] [--no-tune]
//! ```
//! It receives on queue 0 of `--in`, rewrites the Ethernet addresses and
//! transmits on queue 0 of `--out`; both sockets share one UMEM, so a frame
//! is sent from where it was received. After `--warmup` seconds it measures
//! for `--seconds` and prints one line: packets forwarded, the forwarding
//! thread's CPU time (getrusage(RUSAGE_THREAD); with busy polling this
//! includes the NAPI work it drives) and the busy-poll state. Driven by
//! `scripts/xsk_rig.sh` and `scripts/lane_rig.sh`, which run it inside the
//! router namespace of the 3-namespace rig.

use super::{Args, parse_mac};
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Instant;
use tern_packet::{PacketPool, PoolConfig, Port};
use tern_xdp::{BusyPoll, SteerOptions, SteeringProgram, Umem, XskConfig, XskPort, pin_thread_to_cpu, thread_cpu_ns};

fn fwd(a: &Args) -> Result<(), String> {
    let input = a.get("--in").ok_or("--in missing")?;
    let output = a.get("--out").ok_or("--out missing")?;
    let dst = parse_mac(a.get("--dst-mac").ok_or("--dst-mac missing")?)?;
    let src = parse_mac(a.get("--src-mac").ok_or("--src-mac missing")?)?;
    let busy = match a.get("--busy-poll").unwrap_or("on") {
        "on" => BusyPoll::On,
        "off" => BusyPoll::Off,
        o => return Err(format!("--busy-poll {o}: on or off")),
    };
    let warmup = a.secs("--warmup", 2.0)?;
    let secs = a.secs("--seconds", 5.0)?;
    if let Some(cpu) = a.get("--cpu") {
        let cpu = cpu.parse::<usize>().map_err(|e| format!("--cpu: {e}"))?;
        pin_thread_to_cpu(cpu).map_err(|e| format!("pin to cpu {cpu}: {e}"))?;
    }

    let mut pool = PacketPool::new(PoolConfig { frames: 8192, ..PoolConfig::default() }).map_err(|e| e.to_string())?;
    let start_frames = pool.available();
    let mut steer = SteeringProgram::attach(input, SteerOptions::default()).map_err(|e| e.to_string())?;
    for l in a.all("--local") {
        steer.add_local(l.parse::<IpAddr>().map_err(|e| format!("--local {l}: {e}"))?).map_err(|e| e.to_string())?;
    }
    let umem = Umem::new(&pool).map_err(|e| e.to_string())?;
    let cfg = |ifname: &str| XskConfig { busy_poll: busy, tune_napi: !a.has("--no-tune"), ..XskConfig::new(ifname, 0) };
    let mut rx = XskPort::open(&umem, &cfg(input), &mut pool).map_err(|e| e.to_string())?;
    let mut tx = XskPort::open(&umem, &XskConfig { busy_poll: BusyPoll::Off, ..cfg(output) }, &mut pool)
        .map_err(|e| e.to_string())?;
    steer.register(&rx).map_err(|e| e.to_string())?;
    eprintln!(
        "tern-bench xsk-fwd: {} -> {} ({} mode), busy poll {:?}",
        input,
        output,
        if rx.is_zero_copy() { "zero-copy" } else { "copy" },
        busy
    );

    let mut batch = Vec::with_capacity(64);
    let begin = Instant::now();
    let mut window: Option<(Instant, u64, u64)> = None;
    let mut fwd = 0u64;
    let (mut loops, mut busy_loops) = (0u64, 0u64);
    loop {
        loops += 1;
        batch.clear();
        let n = rx.rx_burst(&mut pool, &mut batch, 64);
        if n > 0 {
            busy_loops += 1;
            for &i in &batch {
                let d = pool.data_mut(i);
                if d.len() >= 12 {
                    d[..6].copy_from_slice(&dst);
                    d[6..12].copy_from_slice(&src);
                }
            }
            fwd += tx.tx_burst(&mut pool, &batch).sent as u64;
        }
        rx.service(&mut pool);
        tx.service(&mut pool);
        let now = Instant::now();
        match window {
            None if now - begin >= warmup => window = Some((now, fwd, thread_cpu_ns())),
            Some((t0, f0, c0)) if now - t0 >= secs => {
                let dt = (now - t0).as_secs_f64();
                let pkts = fwd - f0;
                let cpu = thread_cpu_ns() - c0;
                println!(
                    "fwd pkts={pkts} seconds={dt:.3} mpps={:.3} thread_cpu_ns={cpu} ns_per_pkt={:.0} busy_poll={:?}",
                    pkts as f64 / dt / 1e6,
                    cpu as f64 / pkts.max(1) as f64,
                    rx.busy_poll_state()
                );
                break;
            }
            _ => {}
        }
    }
    let s = rx.stats();
    let v = steer.verdicts().map_err(|e| e.to_string())?;
    eprintln!(
        "tern-bench xsk-fwd: rx {:?}\ntern-bench xsk-fwd: tx {:?}\ntern-bench xsk-fwd: verdicts {v:?}",
        s,
        tx.stats()
    );
    eprintln!(
        "tern-bench xsk-fwd: loops {loops}, with packets {busy_loops}, fill starved {}; rx socket {:?}",
        rx.fill_starved(),
        rx.kernel_stats()
    );
    rx.close(&mut pool);
    tx.close(&mut pool);
    if pool.available() != start_frames {
        eprintln!("tern-bench xsk-fwd: {} frames missing after close", start_frames - pool.available());
    }
    Ok(())
}

/// `tern-bench xsk-fwd ARGS...` (the options above).
pub fn main(args: &[String]) -> ExitCode {
    match fwd(&Args(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern-bench xsk-fwd: {e}");
            ExitCode::FAILURE
        }
    }
}
