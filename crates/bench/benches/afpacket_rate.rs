//! AF_PACKET throughput and latency across a veth pair, for the
//! performance notes.
//!
//! ```text
//! cargo bench -p tern-bench --bench afpacket_rate -- [rate|latency] [options]
//!   --rx v2|v3            receive ring format (default: both)
//!   --tx sendmmsg|ring    transmit mode (default: both)
//!   --seconds N           rate: seconds per run (default 3)
//!   --size N              frame bytes without FCS (default 60: a 64-byte frame on the wire)
//!   --samples N           latency: frames (default 2000)
//!   --interval-us N       latency: gap between frames (default 1000)
//!   --spin                latency: the receiver spins instead of sleeping in poll(2)
//!   --blocks N            receive ring blocks of 64 KiB (default: the driver's default)
//!   --repeat N            run every combination N times, interleaved (default 1)
//! ```
//!
//! Needs root: it creates a namespace `tio-rate-<pid>` holding a veth
//! pair, sends from an [`AfPacketPort`] on one end (one thread) to an
//! [`AfPacketPort`] on the other (another thread), and deletes the
//! namespace when done. `rate` offers traffic as fast as one thread can and
//! reports what was sent and what arrived, and the CPU time each thread
//! spent per packet (the sender's includes the kernel's veth delivery into
//! the receiver's ring, which runs in its softirq; the receiver sleeps in
//! poll(2) when idle); `latency` sends a timestamped
//! frame at a low rate and reports one-way latency percentiles as an idle
//! worker (sleeping in poll(2)) sees them.

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tern_io::{AfPacketConfig, AfPacketPort, TpacketVersion, TxMode, netdev, poll_readable};
use tern_packet::{PacketPool, PoolConfig, Port};

struct Opts {
    latency: bool,
    rx: Vec<TpacketVersion>,
    tx: Vec<TxMode>,
    seconds: f64,
    size: usize,
    samples: usize,
    interval_us: u64,
    spin: bool,
    blocks: Option<u32>,
    repeat: usize,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        latency: false,
        rx: vec![TpacketVersion::V2, TpacketVersion::V3],
        tx: vec![TxMode::Sendmmsg, TxMode::Ring],
        seconds: 3.0,
        size: 60,
        samples: 2000,
        interval_us: 1000,
        spin: false,
        blocks: None,
        repeat: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "rate" => o.latency = false,
            "latency" => o.latency = true,
            "--rx" => {
                o.rx = match val()?.as_str() {
                    "v2" => vec![TpacketVersion::V2],
                    "v3" => vec![TpacketVersion::V3],
                    v => return Err(format!("--rx {v}: expected v2 or v3")),
                }
            }
            "--tx" => {
                o.tx = match val()?.as_str() {
                    "sendmmsg" => vec![TxMode::Sendmmsg],
                    "ring" => vec![TxMode::Ring],
                    v => return Err(format!("--tx {v}: expected sendmmsg or ring")),
                }
            }
            "--seconds" => o.seconds = val()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--size" => o.size = val()?.parse().map_err(|e| format!("--size: {e}"))?,
            "--samples" => o.samples = val()?.parse().map_err(|e| format!("--samples: {e}"))?,
            "--interval-us" => o.interval_us = val()?.parse().map_err(|e| format!("--interval-us: {e}"))?,
            "--spin" => o.spin = true,
            // What `cargo bench` appends to a harness-less bench's arguments.
            "--bench" => {}
            "--repeat" => o.repeat = val()?.parse().map_err(|e| format!("--repeat: {e}"))?,
            "--blocks" => o.blocks = Some(val()?.parse().map_err(|e| format!("--blocks: {e}"))?),
            "-h" | "--help" => return Err("see the header of crates/bench/benches/afpacket_rate.rs".into()),
            x => return Err(format!("unknown argument {x}")),
        }
    }
    if !(60..=1514).contains(&o.size) {
        return Err("--size must be 60..=1514".into());
    }
    Ok(o)
}

/// The namespace and veth pair; deleted on drop.
struct Lab {
    ns: String,
}

impl Lab {
    fn new() -> Result<Lab, String> {
        let ns = format!("tio-rate-{}", std::process::id());
        ip(&["netns", "add", &ns])?;
        let lab = Lab { ns };
        lab.ip(&["link", "add", "va", "type", "veth", "peer", "name", "vb"])?;
        lab.ip(&["link", "set", "va", "up"])?;
        lab.ip(&["link", "set", "vb", "up"])?;
        Ok(lab)
    }

    fn ip(&self, args: &[&str]) -> Result<(), String> {
        let mut a = vec!["-n", self.ns.as_str()];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// Opens a port inside the namespace.
    fn open(&self, cfg: AfPacketConfig) -> Result<AfPacketPort, String> {
        let ns = self.ns.clone();
        thread::spawn(move || {
            netdev::enter_netns(&ns).map_err(|e| e.to_string())?;
            for k in ["ipv6/conf/va/disable_ipv6", "ipv6/conf/vb/disable_ipv6"] {
                let _ = netdev::sysctl_write(k, "1");
            }
            AfPacketPort::open_with(&cfg).map_err(|e| e.to_string())
        })
        .join()
        .map_err(|_| "namespace thread panicked".to_string())?
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.ns]);
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn pool() -> Result<PacketPool, String> {
    PacketPool::new(PoolConfig { frames: 8192, ..PoolConfig::default() }).map_err(|e| e.to_string())
}

/// An Ethernet/IPv4/UDP frame of `size` bytes to `dst`.
fn template(dst: [u8; 6], size: usize) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x08, 0x00]);
    let ip_len = (size - 14) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 19, 0, 1];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    let mut s: u32 = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x04, 0xd2, 0x16, 0x2e]);
    f.extend_from_slice(&(ip_len - 20).to_be_bytes());
    f.extend_from_slice(&[0, 0]); // no UDP checksum (allowed for IPv4)
    f.resize(size, 0);
    f
}

/// CPU time this thread has run, in nanoseconds (first field of
/// /proc/thread-self/schedstat): on a shared machine, CPU per packet is the
/// figure that does not depend on how much of the CPU the run was given.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn label(v: TpacketVersion, t: TxMode) -> String {
    format!("rx {v:?} / tx {t:?}")
}

fn rate(lab: &Lab, o: &Opts, v: TpacketVersion, t: TxMode) -> Result<(), String> {
    let mut ca = AfPacketConfig::new("va");
    ca.tx_mode = t;
    let mut cb = AfPacketConfig::new("vb");
    cb.version = v;
    if let Some(n) = o.blocks {
        cb.block_count = n;
    }
    let mut a = lab.open(ca)?;
    let mut b = lab.open(cb)?;
    let tmpl = template(b.mac(), o.size);
    let stop_rx = Arc::new(AtomicBool::new(false));
    let stop = stop_rx.clone();
    // The receiver sleeps in poll(2) when the ring is empty, as an idle
    // worker does, so its CPU time is the cost of receiving.
    let rx = thread::spawn(move || -> Result<(u64, u64, AfPacketPort), String> {
        let mut p = pool()?;
        let mut got = 0u64;
        let mut buf = Vec::with_capacity(256);
        let cpu0 = thread_cpu_ns();
        while !stop.load(Ordering::Relaxed) {
            buf.clear();
            let n = b.rx_burst(&mut p, &mut buf, 256);
            got += n as u64;
            p.free_all(&buf);
            if n == 0
                && let Some(fd) = b.wait_fd()
            {
                poll_readable(&[fd], 10).map_err(|e| e.to_string())?;
            }
        }
        Ok((got, thread_cpu_ns() - cpu0, b))
    });
    let mut p = pool()?;
    let dur = Duration::from_secs_f64(o.seconds);
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    let (mut sent, mut offered) = (0u64, 0u64);
    let mut batch = Vec::with_capacity(256);
    while t0.elapsed() < dur {
        batch.clear();
        for _ in 0..256 {
            match p.alloc_from(&tmpl) {
                Some(i) => batch.push(i),
                None => break,
            }
        }
        offered += batch.len() as u64;
        sent += a.tx_burst(&mut p, &batch).sent as u64;
    }
    let secs = t0.elapsed().as_secs_f64();
    let tx_cpu = thread_cpu_ns() - cpu0;
    // Let the receiver take what is still in flight, then stop it.
    thread::sleep(Duration::from_millis(200));
    stop_rx.store(true, Ordering::Relaxed);
    let (got, rx_cpu, b) = rx.join().map_err(|_| "receiver panicked".to_string())??;
    let (sa, db) = (a.stats(), b.detail_stats());
    let per = |cpu: u64, n: u64| if n > 0 { cpu as f64 / n as f64 } else { 0.0 };
    println!(
        "{:<26} sent {:>6.3} Mpps  received {:>6.3} Mpps ({:>5.1}%)  tx_dropped {}  ring drops {}  \
         CPU/packet: sender {:>6.0} ns  receiver {:>6.0} ns",
        label(v, t),
        sent as f64 / secs / 1e6,
        got as f64 / secs / 1e6,
        if sent > 0 { got as f64 * 100.0 / sent as f64 } else { 0.0 },
        sa.tx_dropped + (offered - sent),
        db.kernel_drops,
        per(tx_cpu, sent),
        per(rx_cpu, got),
    );
    Ok(())
}

fn latency(lab: &Lab, o: &Opts, v: TpacketVersion, t: TxMode) -> Result<(), String> {
    let mut ca = AfPacketConfig::new("va");
    ca.tx_mode = t;
    let mut cb = AfPacketConfig::new("vb");
    cb.version = v;
    if let Some(n) = o.blocks {
        cb.block_count = n;
    }
    let mut a = lab.open(ca)?;
    let mut b = lab.open(cb)?;
    let tmpl = template(b.mac(), o.size.max(64));
    let start = Instant::now();
    let samples = o.samples;
    let spin = o.spin;
    let rx = thread::spawn(move || -> Result<Vec<u64>, String> {
        let mut p = pool()?;
        let mut lat = Vec::with_capacity(samples);
        let mut buf = Vec::with_capacity(256);
        let deadline = Instant::now() + Duration::from_secs(60);
        while lat.len() < samples && Instant::now() < deadline {
            buf.clear();
            if b.rx_burst(&mut p, &mut buf, 256) == 0 {
                if !spin && let Some(fd) = b.wait_fd() {
                    poll_readable(&[fd], 100).map_err(|e| e.to_string())?;
                }
                continue;
            }
            let now = start.elapsed().as_nanos() as u64;
            for &i in &buf {
                let d = p.data(i);
                if d.len() >= 50 && d[12..14] == [0x08, 0x00] {
                    let mut s = [0u8; 8];
                    s.copy_from_slice(&d[42..50]);
                    lat.push(now.saturating_sub(u64::from_be_bytes(s)));
                }
            }
            p.free_all(&buf);
        }
        Ok(lat)
    });
    let mut p = pool()?;
    for _ in 0..samples {
        let Some(i) = p.alloc_from(&tmpl) else {
            return Err("pool empty".into());
        };
        let stamp = start.elapsed().as_nanos() as u64;
        p.data_mut(i)[42..50].copy_from_slice(&stamp.to_be_bytes());
        a.tx_burst(&mut p, &[i]);
        // Pacing the sender, not synchronisation.
        thread::sleep(Duration::from_micros(o.interval_us));
    }
    let mut lat = rx.join().map_err(|_| "receiver panicked".to_string())??;
    if lat.is_empty() {
        return Err("no frame arrived".into());
    }
    lat.sort_unstable();
    let pct = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "{:<28} {} samples ({})  p50 {:>8.1} us  p90 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us",
        label(v, t),
        lat.len(),
        if o.spin { "spinning" } else { "poll(2)" },
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0),
    );
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("afpacket_rate: {e}");
            return ExitCode::from(2);
        }
    };
    let lab = match Lab::new() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("afpacket_rate: cannot build the veth lab (root and iproute2 needed): {e}");
            return ExitCode::FAILURE;
        }
    };
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    println!("veth pair in namespace {}, {}-byte frames, {cpus} CPUs", lab.ns, o.size);
    for _ in 0..o.repeat {
        for &v in &o.rx {
            for &t in &o.tx {
                let r = if o.latency { latency(&lab, &o, v, t) } else { rate(&lab, &o, v, t) };
                if let Err(e) = r {
                    eprintln!("afpacket_rate: {}: {e}", label(v, t));
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    ExitCode::SUCCESS
}
