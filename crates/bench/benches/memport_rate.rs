//! Cost of the memory generator port that feeds the engine benchmark:
//! receive 256-packet bursts of 64-byte frames and transmit (count and
//! free) them, nothing else.
//!
//! ```text
//! cargo bench -p tern-bench --bench memport_rate [-- SECONDS]
//! ```

use std::time::{Duration, Instant};

use tern_io::MemPort;
use tern_packet::{PacketPool, PoolConfig, Port};

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let Ok(mut pool) = PacketPool::new(PoolConfig { frames: 4096, ..PoolConfig::default() }) else {
        eprintln!("memport_rate: cannot allocate the pool");
        std::process::exit(1);
    };
    // 60 bytes: a 64-byte frame on the wire without its FCS; four flows.
    let templates: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 60]).collect();
    let Some(mut port) = MemPort::generator("gen", &templates, None) else {
        eprintln!("memport_rate: bad templates");
        std::process::exit(1);
    };
    let mut batch = Vec::with_capacity(256);
    let mut n = 0u64;
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    let dur = Duration::from_secs_f64(secs);
    while t0.elapsed() < dur {
        for _ in 0..1000 {
            batch.clear();
            n += port.rx_burst(&mut pool, &mut batch, 256) as u64;
            port.tx_burst(&mut pool, &batch);
        }
    }
    let t = t0.elapsed().as_secs_f64();
    let cpu = (thread_cpu_ns() - cpu0) as f64;
    println!(
        "MemPort generator rx + counting tx, 256-packet bursts of 60-byte frames: {:.1} Mpps wall clock, \
         {:.2} ns of CPU per packet",
        n as f64 / t / 1e6,
        cpu / n as f64
    );
}

/// CPU time this thread has run, in nanoseconds (/proc/thread-self/schedstat).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}
