//! A minimal AF_XDP forwarder for measurements, and a counting sink.
//!
//! ```text
//! xsk_fwd fwd --in r0 --out r1 --dst-mac 02:00:00:00:00:21 --src-mac 02:00:00:00:00:20 \
//!     [--local 10.77.1.1]... [--busy-poll on|off] [--cpu 1] [--warmup 2] [--seconds 5] [--no-tune]
//! xsk_fwd sink --dev s0 [--warmup 2 | --start-file PATH] [--seconds 5] [--linger 0]
//! xsk_fwd gen --dev g0 --dst-mac .. --src-mac .. --src 10.77.1.2 --dst 10.77.2.2 \
//!     [--flows 1] [--cpu 0] [--seconds 8]
//! ```
//! `fwd` receives on queue 0 of `--in`, rewrites the Ethernet addresses and
//! transmits on queue 0 of `--out`; both sockets share one UMEM, so a frame
//! is sent from where it was received. After `--warmup` seconds it measures
//! for `--seconds` and prints one line: packets forwarded, the forwarding
//! thread's CPU time (getrusage(RUSAGE_THREAD); with busy polling this
//! includes the NAPI work it drives) and the busy-poll state. `sink`
//! attaches the counting XDP program to `--dev` and prints the packets it
//! counted in the same window; with `--start-file` its window starts when
//! that file appears (the rig creates it as its own window starts, so both
//! count the same seconds), and `--linger` keeps the program attached that
//! long after it printed (frames still arriving are taken, not dropped: a
//! veth redirects into its peer only while the peer runs XDP). `gen` sends
//! 64-byte UDP frames out of `--dev` through BPF_PROG_TEST_RUN live frames
//! (counted as offered, not as delivered: the peer may drop them). Driven
//! by `scripts/xsk_rig.sh` and `scripts/lane_rig.sh`, which run each inside
//! its namespace of the 3-namespace rig.

use std::net::IpAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tern_packet::{PacketPool, PoolConfig, Port};
use tern_xdp::*;

struct Args(Vec<String>);

impl Args {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().position(|a| a == key).and_then(|i| self.0.get(i + 1)).map(String::as_str)
    }
    fn all(&self, key: &str) -> Vec<&str> {
        self.0.windows(2).filter(|w| w[0] == key).map(|w| w[1].as_str()).collect()
    }
    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|a| a == key)
    }
    fn secs(&self, key: &str, default: f64) -> Result<Duration, String> {
        let v = self.get(key).map_or(Ok(default), |s| s.parse::<f64>().map_err(|e| format!("{key} {s}: {e}")))?;
        Ok(Duration::from_secs_f64(v))
    }
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let v: Vec<u8> = s
        .split(':')
        .map(|p| u8::from_str_radix(p, 16))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("MAC {s}: {e}"))?;
    v.try_into().map_err(|_| format!("MAC {s}: need 6 bytes"))
}

fn sink(a: &Args) -> Result<(), String> {
    let dev = a.get("--dev").ok_or("--dev missing")?;
    let warmup = a.secs("--warmup", 2.0)?;
    let secs = a.secs("--seconds", 5.0)?;
    let linger = a.secs("--linger", 0.0)?;
    let prog = SinkProgram::attach(dev).map_err(|e| e.to_string())?;
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
    let (p0, b0) = prog.count().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    std::thread::sleep(secs);
    let (p1, b1) = prog.count().map_err(|e| e.to_string())?;
    let dt = t0.elapsed().as_secs_f64();
    println!("sink pkts={} bytes={} seconds={dt:.3} mpps={:.3}", p1 - p0, b1 - b0, (p1 - p0) as f64 / dt / 1e6);
    std::thread::sleep(linger);
    Ok(())
}

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
        "xsk_fwd: {} -> {} ({} mode), busy poll {:?}",
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
    eprintln!("xsk_fwd: rx {:?}\nxsk_fwd: tx {:?}\nxsk_fwd: verdicts {v:?}", s, tx.stats());
    eprintln!(
        "xsk_fwd: loops {loops}, with packets {busy_loops}, fill starved {}; rx socket {:?}",
        rx.fill_starved(),
        rx.kernel_stats()
    );
    rx.close(&mut pool);
    tx.close(&mut pool);
    if pool.available() != start_frames {
        eprintln!("xsk_fwd: {} frames missing after close", start_frames - pool.available());
    }
    Ok(())
}

/// A 60-byte Ethernet/IPv4/UDP frame (64 on the wire with the FCS), UDP
/// checksum 0 ("not computed", RFC 768).
fn udp_frame(dst_mac: [u8; 6], src_mac: [u8; 6], src: [u8; 4], dst: [u8; 4], sport: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let mut sum: u32 = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&9000u16.to_be_bytes());
    f.extend_from_slice(&26u16.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(60, 0);
    f
}

fn generate(a: &Args) -> Result<(), String> {
    let dev = a.get("--dev").ok_or("--dev missing")?;
    let dst = parse_mac(a.get("--dst-mac").ok_or("--dst-mac missing")?)?;
    let src = parse_mac(a.get("--src-mac").ok_or("--src-mac missing")?)?;
    let ip = |k: &str| -> Result<[u8; 4], String> {
        let s = a.get(k).ok_or(format!("{k} missing"))?;
        s.parse::<std::net::Ipv4Addr>().map(|a| a.octets()).map_err(|e| format!("{k} {s}: {e}"))
    };
    let (sip, dip) = (ip("--src")?, ip("--dst")?);
    let flows = a.get("--flows").map_or(Ok(1u16), |s| s.parse::<u16>().map_err(|e| format!("--flows: {e}")))?.max(1);
    let secs = a.secs("--seconds", 8.0)?;
    if let Some(cpu) = a.get("--cpu") {
        let cpu = cpu.parse::<usize>().map_err(|e| format!("--cpu: {e}"))?;
        pin_thread_to_cpu(cpu).map_err(|e| format!("pin to cpu {cpu}: {e}"))?;
    }
    let frames: Vec<Vec<u8>> = (0..flows).map(|f| udp_frame(dst, src, sip, dip, 10000 + f)).collect();
    let mut g = LiveFrameGenerator::new(dev).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut sent = 0u64;
    const REPEAT: u32 = 1 << 14;
    while t0.elapsed() < secs {
        for f in &frames {
            g.send(f, REPEAT).map_err(|e| e.to_string())?;
            sent += u64::from(REPEAT);
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    println!("gen pkts={sent} seconds={dt:.3} mpps={:.3}", sent as f64 / dt / 1e6);
    Ok(())
}

fn main() -> ExitCode {
    let args = Args(std::env::args().skip(1).collect());
    let r = match args.0.first().map(String::as_str) {
        Some("fwd") => fwd(&args),
        Some("sink") => sink(&args),
        Some("gen") => generate(&args),
        _ => Err("usage: xsk_fwd fwd|sink ... (see the doc comment)".into()),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xsk_fwd: {e}");
            ExitCode::FAILURE
        }
    }
}
