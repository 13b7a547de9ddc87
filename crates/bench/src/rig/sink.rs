//! `tern-bench sink`: the lab's one sink for the veth rigs: the RFC 2544
//! tester's XDP receiver (bpf/sink.bpf.c) attached to a device, counting
//! the frames of `tern-bench gen` (those with the tester's signature, in
//! GRE or not) and dropping them; other frames go to the kernel.
//!
//! ```text
//! tern-bench sink --dev s0 [--warmup 2 | --start-file PATH] [--seconds 5] [--linger 0]
//! ```
//! Prints the frames it counted in its window, one line:
//! `sink pkts=N bytes=B seconds=S mpps=M` (and on stderr what it passed to
//! the kernel). With `--start-file` the window starts when that file
//! appears (the rig creates it as its own window starts, so both count the
//! same seconds); `--linger` keeps the program attached that long after it
//! printed (frames still arriving are taken, not dropped: a veth redirects
//! into its peer only while the peer runs XDP).

use super::Args;
use crate::bpf::Sink;
use crate::traffic::MAX_STREAMS;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// (frames, bytes) counted so far over every stream.
fn counted(sink: &mut Sink) -> Result<(u64, u64), String> {
    let streams = sink.streams(MAX_STREAMS).map_err(|e| e.to_string())?;
    Ok(streams.iter().fold((0, 0), |(p, b), s| (p + s.received, b + s.bytes)))
}

fn run(a: &Args) -> Result<(), String> {
    let dev = a.get("--dev").ok_or("--dev missing")?;
    let warmup = a.secs("--warmup", 2.0)?;
    let secs = a.secs("--seconds", 5.0)?;
    let linger = a.secs("--linger", 0.0)?;
    let mut sink = Sink::load().map_err(|e| e.to_string())?;
    sink.reset().map_err(|e| e.to_string())?;
    sink.attach(dev).map_err(|e| e.to_string())?;
    match a.get("--start-file") {
        Some(path) => {
            // Polled: a rig tool, a millisecond of skew is fine.
            let give_up = Instant::now() + warmup + Duration::from_secs(120);
            while !std::path::Path::new(path).exists() {
                if Instant::now() > give_up {
                    return Err(format!("{path} did not appear"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        None => std::thread::sleep(warmup),
    }
    let (p0, b0) = counted(&mut sink)?;
    let t0 = Instant::now();
    std::thread::sleep(secs);
    let (p1, b1) = counted(&mut sink)?;
    let dt = t0.elapsed().as_secs_f64();
    println!("sink pkts={} bytes={} seconds={dt:.3} mpps={:.3}", p1 - p0, b1 - b0, (p1 - p0) as f64 / dt / 1e6);
    let misc = sink.misc().map_err(|e| e.to_string())?;
    eprintln!(
        "tern-bench sink: passed to the kernel {}, bad stream {}, in GRE {}",
        misc.passed, misc.bad_stream, misc.in_gre
    );
    std::thread::sleep(linger);
    Ok(())
}

/// `tern-bench sink ARGS...` (the options above).
pub fn main(args: &[String]) -> ExitCode {
    match run(&Args(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tern-bench sink: {e}");
            ExitCode::FAILURE
        }
    }
}
