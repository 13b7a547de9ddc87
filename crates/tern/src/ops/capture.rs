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

/// Why frames could not be written.
enum WriteFail {
    /// The reader of standard output went away (`-w - | head`): stop quietly.
    Closed,
    Other(String),
}

fn write_all<W: Write>(w: &mut PcapWriter<W>, b: &CaptureBatch) -> Result<u64, WriteFail> {
    for f in &b.frames {
        let data = from_hex(&f.data).ok_or_else(|| WriteFail::Other("tern sent a frame that is not hex".into()))?;
        let ts = Duration::from_nanos(f.unix_ns);
        w.write_record(ts, &data, f.orig_len as usize).map_err(|e| fail(&e))?;
    }
    Ok(b.frames.len() as u64)
}

fn fail(e: &std::io::Error) -> WriteFail {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        WriteFail::Closed
    } else {
        WriteFail::Other(format!("writing the capture: {e}"))
    }
}

/// Runs the capture; with `json` the summary is `{"frames", "lost",
/// "file"}`.
pub fn run(ctx: &mut Ctx, a: &CaptureArgs, json: bool) -> Result<String, String> {
    let to_stdout = a.file.as_os_str() == "-";
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout())
    } else {
        Box::new(std::io::BufWriter::new(
            std::fs::File::create(&a.file).map_err(|e| format!("{}: {e}", a.file.display()))?,
        ))
    };
    // The header goes out at once: a reader already gone ends tern here,
    // before a capture starts in the daemon.
    let mut w = match PcapWriter::new(sink, TsPrecision::Nano).and_then(|mut w| w.flush().map(|()| w)) {
        Ok(w) => w,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => crate::exit_on_write_error(&e),
        Err(e) => return Err(e.to_string()),
    };
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
    let outcome = loop {
        let deadline = a.seconds.is_some_and(|s| t0.elapsed().as_secs_f64() >= s);
        if stop.load(Ordering::Relaxed) || deadline {
            let b = batch(ctx.call(&Command::CaptureStop(CaptureIdArgs { id }))?)?;
            break write_all(&mut w, &b).map(|n| (n, b));
        }
        let b = batch(ctx.call(&Command::CaptureRead(CaptureIdArgs { id }))?)?;
        match write_all(&mut w, &b) {
            Ok(n) => written += n,
            Err(e) => break Err(e),
        }
        if b.done {
            break Ok((0, b));
        }
        if b.frames.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let last = match outcome.and_then(|(n, b)| w.flush().map_err(|e| fail(&e)).map(|()| (n, b))) {
        Ok((n, b)) => {
            written += n;
            b
        }
        Err(WriteFail::Closed) => {
            // Stop the daemon's capture (it would otherwise run until its
            // count), then end as `head` asked.
            let _ = ctx.call(&Command::CaptureStop(CaptureIdArgs { id }));
            crate::exit_on_write_error(&std::io::ErrorKind::BrokenPipe.into());
        }
        Err(WriteFail::Other(e)) => return Err(e),
    };
    let lost = if last.dropped > 0 { format!(" ({} copies lost: queue full)", last.dropped) } else { String::new() };
    if json {
        let file = if to_stdout { "-".to_string() } else { a.file.display().to_string() };
        let v = serde_json::json!({ "frames": written, "lost": last.dropped, "file": file });
        if to_stdout {
            // Standard output carries the pcap; the summary goes beside it.
            eprintln!("{v}");
            return Ok(String::new());
        }
        return Ok(format!("{v}\n"));
    }
    if to_stdout {
        eprintln!("{written} frames captured{lost}");
        Ok(String::new())
    } else {
        Ok(format!("{written} frames written to {}{lost}\n", a.file.display()))
    }
}
