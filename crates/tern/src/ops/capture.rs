//! `tern capture IFACE -w FILE`: starts a capture in the daemon, reads
//! the frames as they come and writes them to a pcap file here, on the
//! client's side (the daemon never writes files on a client's behalf).

use super::Ctx;
use super::cli::CaptureArgs;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tern_control::api::types::{CaptureBatch, from_hex};
use tern_control::api::*;
use tern_io::{PcapWriter, TsPrecision};

fn batch(r: Reply) -> Result<CaptureBatch, String> {
    match r {
        Reply::Capture(b) => Ok(b),
        other => Err(format!("unexpected answer {other:?}")),
    }
}

fn write_all<W: Write>(w: &mut PcapWriter<W>, b: &CaptureBatch) -> Result<u64, String> {
    for f in &b.frames {
        let data = from_hex(&f.data).ok_or("tern sent a frame that is not hex")?;
        let ts = Duration::from_nanos(f.unix_ns);
        w.write_record(ts, &data, f.orig_len as usize).map_err(|e| format!("writing the capture: {e}"))?;
    }
    Ok(b.frames.len() as u64)
}

pub fn run(ctx: &mut Ctx, a: &CaptureArgs) -> Result<String, String> {
    let to_stdout = a.file.as_os_str() == "-";
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout())
    } else {
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(&a.file).map_err(|e| format!("{}: {e}", a.file.display()))?,
        ))
    };
    let mut w = PcapWriter::new(sink, TsPrecision::Nano).map_err(|e| e.to_string())?;
    let start = batch(ctx.call(&Command::CaptureStart(CaptureStartArgs {
        target: a.target.clone(),
        direction: Some(a.direction.clone()),
        count: a.count,
        snaplen: Some(a.snaplen),
    }))?)?;
    let id = start.id;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&stop));
    }
    if !to_stdout {
        eprintln!("capturing on {} into {} (Ctrl-C stops)", a.target, a.file.display());
    }
    if let Some(n) = &start.note {
        eprintln!("note: {n}");
    }
    let t0 = Instant::now();
    let mut written = 0u64;
    let last = loop {
        let deadline = a.seconds.is_some_and(|s| t0.elapsed().as_secs_f64() >= s);
        if stop.load(Ordering::Relaxed) || deadline {
            let b = batch(ctx.call(&Command::CaptureStop(CaptureIdArgs { id }))?)?;
            written += write_all(&mut w, &b)?;
            break b;
        }
        let b = batch(ctx.call(&Command::CaptureRead(CaptureIdArgs { id }))?)?;
        written += write_all(&mut w, &b)?;
        if b.done {
            break b;
        }
        if b.frames.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    w.flush().map_err(|e| format!("writing the capture: {e}"))?;
    let lost = if last.dropped > 0 { format!(" ({} copies lost: queue full)", last.dropped) } else { String::new() };
    if to_stdout {
        eprintln!("{written} frames captured{lost}");
        Ok(String::new())
    } else {
        Ok(format!("{written} frames written to {}{lost}\n", a.file.display()))
    }
}
