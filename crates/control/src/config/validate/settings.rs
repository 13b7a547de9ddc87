//! The sections that configure no object: `[dataplane]`, `[neighbor]`,
//! `[reassembly]`, `[metrics]`, `[api]` and `[linux]`.

use crate::config::{
    ApiCfg, Dataplane, MAX_CPU, MetricsCfg, NEIGHBOR_MAX_MS, NEIGHBOR_MAX_PROBES, NeighborCfg, Problem,
    REASS_MAX_DATAGRAMS, REASS_MAX_FRAGMENTS, REASS_MAX_TIMEOUT_MS, ReassemblyCfg, Seg, bad, k, quote,
};

/// The largest rate and burst of a `[dataplane.punt]` class (packets per
/// second, packets): beyond, a policer would not protect anything.
const PUNT_MAX_RATE: u32 = 10_000_000;

pub(super) fn dataplane(d: &Dataplane) -> Result<(), Problem> {
    if d.workers == 0 || d.workers > 64 {
        return Err(bad(vec![k("dataplane"), k("workers")], format!("{} workers: need 1..=64", d.workers)));
    }
    if !(1024..=1 << 20).contains(&d.pool_frames) {
        return Err(bad(vec![k("dataplane"), k("pool_frames")], format!("{}: need 1024..=1048576", d.pool_frames)));
    }
    if !d.cpus.is_empty() && d.cpus.len() < usize::from(d.workers) {
        return Err(bad(vec![k("dataplane"), k("cpus")], "give one CPU per worker, or none"));
    }
    for (key, list) in [("cpus", &d.cpus), ("control_cpus", &d.control_cpus)] {
        if let Some((i, c)) = list.iter().enumerate().find(|&(_, &c)| c >= MAX_CPU) {
            return Err(bad(vec![k("dataplane"), k(key), Seg::Index(i)], format!("cpu {c}: need 0..{MAX_CPU}")));
        }
    }
    for (name, (rate, burst)) in crate::config::PuntCfg::NAMES.iter().zip(d.punt.rates()) {
        if rate > PUNT_MAX_RATE {
            return Err(bad(
                vec![k("dataplane"), k("punt"), k(name), k("rate")],
                format!("{rate} packets/s: need 0..={PUNT_MAX_RATE} (0: not policed)"),
            ));
        }
        if rate > 0 && !(1..=PUNT_MAX_RATE).contains(&burst) {
            return Err(bad(
                vec![k("dataplane"), k("punt"), k(name), k("burst")],
                format!("{burst} packets: need 1..={PUNT_MAX_RATE}"),
            ));
        }
    }
    Ok(())
}

/// `[neighbor]`, whose queues must fit a worker's buffers (`d`).
pub(super) fn neighbor(n: &NeighborCfg, d: &Dataplane) -> Result<(), Problem> {
    if n.retry_ms == 0 || n.probes == 0 || n.queue_per_dest == 0 || n.queue_total == 0 || n.reachable_ms == 0 {
        return Err(bad(
            vec![k("neighbor")],
            "reachable_ms, retry_ms, probes, queue_per_dest and queue_total must be positive",
        ));
    }
    for (key, v) in [("reachable_ms", n.reachable_ms), ("delay_ms", n.delay_ms), ("retry_ms", n.retry_ms)] {
        if v > NEIGHBOR_MAX_MS {
            return Err(bad(vec![k("neighbor"), k(key)], format!("{v} is more than an hour ({NEIGHBOR_MAX_MS})")));
        }
    }
    if n.probes > NEIGHBOR_MAX_PROBES {
        return Err(bad(vec![k("neighbor"), k("probes")], format!("{} is more than {NEIGHBOR_MAX_PROBES}", n.probes)));
    }
    if n.queue_per_dest > n.queue_total {
        return Err(bad(
            vec![k("neighbor"), k("queue_per_dest")],
            format!("{} is more than queue_total ({})", n.queue_per_dest, n.queue_total),
        ));
    }
    if n.queue_total > d.pool_frames as usize {
        return Err(bad(
            vec![k("neighbor"), k("queue_total")],
            format!(
                "{} is more than the buffers a worker has (dataplane.pool_frames {})",
                n.queue_total, d.pool_frames
            ),
        ));
    }
    Ok(())
}

/// `[reassembly]`: every bound positive and within its range.
pub(super) fn reassembly(r: &ReassemblyCfg) -> Result<(), Problem> {
    let key = |name: &str| vec![k("reassembly"), k(name)];
    let bounds: [(&str, u64, u64, &str); 5] = [
        ("max_datagrams", r.max_datagrams as u64, REASS_MAX_DATAGRAMS as u64, "datagrams"),
        ("max_per_source", r.max_per_source as u64, r.max_datagrams as u64, "datagrams (max_datagrams)"),
        ("max_size", r.max_size as u64, 65535, "bytes (an IP datagram's largest payload)"),
        ("max_fragments", r.max_fragments as u64, REASS_MAX_FRAGMENTS as u64, "fragments"),
        ("timeout_ms", r.timeout_ms, REASS_MAX_TIMEOUT_MS, "ms"),
    ];
    for (name, v, max, unit) in bounds {
        if v == 0 || v > max {
            return Err(bad(key(name), format!("{v}: need 1..={max} {unit}")));
        }
    }
    // The smallest fragment carries 8 bytes: more fragments than that
    // could never make a datagram within max_size.
    if r.max_fragments > r.max_size.div_ceil(8) {
        return Err(bad(
            key("max_fragments"),
            format!("{}: more than max_size ({}) holds in 8-byte fragments", r.max_fragments, r.max_size),
        ));
    }
    Ok(())
}

pub(super) fn metrics(m: &MetricsCfg) -> Result<(), Problem> {
    if !m.listen.is_empty() && m.listen.parse::<std::net::SocketAddr>().is_err() {
        return Err(bad(vec![k("metrics"), k("listen")], format!("{} is not address:port", quote(&m.listen))));
    }
    Ok(())
}

pub(super) fn api(a: &ApiCfg) -> Result<(), Problem> {
    if a.socket.is_empty() {
        return Err(bad(vec![k("api"), k("socket")], "empty socket path"));
    }
    if let Err(e) = a.mode() {
        return Err(bad(vec![k("api"), k("socket_mode")], e));
    }
    // Whether the group exists is a question about the host: `load_for_run`
    // asks it (config check and run), not the parser.
    if a.idle_timeout_ms == 0 {
        return Err(bad(vec![k("api"), k("idle_timeout_ms")], "must be positive"));
    }
    Ok(())
}

/// `[linux]`; returns whether it asks for the TAP exception path.
pub(super) fn linux(l: &crate::config::LinuxCfg) -> Result<bool, Problem> {
    if let Err((key, message)) = l.validate() {
        return Err(bad(vec![k("linux"), k(key)], message));
    }
    let tap = l.exception == crate::config::Exception::Tap;
    if tap && !l.linux_mode() {
        return Err(bad(
            vec![k("linux"), k("exception")],
            "exception = \"tap\" hands the router's own traffic to Linux: it needs mode = \"linux\"",
        ));
    }
    Ok(tap)
}
