//! `capture` sessions: frames copied from the workers, buffered until read
//! or the session idles out.

use super::*;

pub fn capture_start(router: &mut Router, st: &mut OpsState, a: &CaptureStartArgs) -> Result<CaptureBatch, ApiError> {
    // An interface (its port's rx/tx frames) or a graph node (the packets
    // entering it).
    let node = match router.plan().iface_index(&a.target) {
        Some(_) => None,
        None => Some(router.lanes().first().and_then(|w| w.graph.node_id(&a.target)).ok_or_else(|| {
            ApiError::not_found(format!("no interface or node named {}", crate::config::quote(&a.target)))
        })?),
    };
    let port = match node {
        Some(_) => usize::from(u16::MAX),
        None => {
            let ifindex = router.plan().iface_index(&a.target).unwrap_or_default();
            router
                .lanes()
                .first()
                .and_then(|w| {
                    w.ports().iter().position(|s| s.as_ref().is_some_and(|s| s.ifindex == ifindex && !side_port(s)))
                })
                .ok_or_else(|| {
                    let tunnel = matches!(
                        router.plan().ifaces.get(usize::from(ifindex)).map(|p| &p.kind),
                        Some(crate::config::IfacePlanKind::Gre { .. } | crate::config::IfacePlanKind::Ipsec { .. })
                    );
                    if tunnel {
                        ApiError::refused(format!(
                            "{} is a tunnel, without frames of its own: capture its outer packets on the interface towards its remote, or its inner packets at a node (`esp-encrypt` before encryption, `gre-encap`; all tunnels' packets)",
                            a.target
                        ))
                    } else {
                        ApiError::refused(format!("{} has no port of its own (capture its parent interface)", a.target))
                    }
                })?
        }
    };
    let dirs = match a.direction.as_deref().unwrap_or("both") {
        "rx" | "in" => CAPTURE_RX,
        "tx" | "out" => CAPTURE_TX,
        "both" => CAPTURE_RX | CAPTURE_TX,
        d => return Err(ApiError::invalid(format!("direction {}: rx, tx or both", crate::config::quote(d)))),
    };
    if a.count == Some(0) {
        return Err(ApiError::invalid("count 0 captures nothing"));
    }
    if let Some(c) = &st.capture {
        return Err(ApiError::refused(format!(
            "capture {} on {} is running; one capture at a time (stop it, or wait {}s for it to expire)",
            c.id,
            c.iface,
            CAPTURE_IDLE.as_secs()
        )));
    }

    let snaplen = a.snaplen.unwrap_or(65535).clamp(14, 65535);
    let id = st.next_capture_id.max(1);
    st.next_capture_id = id + 1;
    for w in router.lanes().iter() {
        w.capture.take();
        match node {
            Some(n) => w.capture.start_node(n, snaplen),
            None => w.capture.start(port as u16, dirs, snaplen),
        }
    }
    // The XDP lane forwards and drops without the engine seeing the
    // frames: while the capture runs, the port's frames go through the
    // engine (given back once no capture is on: Router::poll).
    let via_engine = match node {
        Some(_) => false,
        None => {
            let ifindex = router.plan().iface_index(&a.target).unwrap_or_default();
            match router.lane_capture(Some(ifindex)) {
                Ok(on) => on,
                Err(e) => {
                    stop_taps(router);
                    return Err(ApiError::internal(format!("cannot hand {} to the engine: {e}", a.target)));
                }
            }
        }
    };
    let wall0 = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    st.capture = Some(CaptureSession {
        id,
        iface: a.target.clone(),
        port: port as u16,
        limit: a.count,
        taken: 0,
        delivered: 0,
        buffer: VecDeque::new(),
        running: true,
        dropped: 0,
        last_read: Instant::now(),
        mono0: tern_engine::clock::now_ns(),
        wall0,
    });
    log::info!("capture {id} started on {} (port {port})", a.target);
    let note = via_engine.then(|| {
        format!(
            "{} is on the XDP lane: while this capture runs its frames go through the engine (slower; counted as \
             xdp-lane/punt-capture)",
            a.target
        )
    });
    Ok(CaptureBatch { id, note, ..CaptureBatch::default() })
}

pub(super) fn session(st: &mut OpsState, id: u64) -> Result<&mut CaptureSession, ApiError> {
    match &mut st.capture {
        Some(c) if c.id == id => Ok(c),
        _ => Err(ApiError::not_found(format!("no capture {id} (finished, stopped or expired)"))),
    }
}

pub(super) fn batch_of(c: &mut CaptureSession, router_dropped: u64) -> CaptureBatch {
    c.last_read = Instant::now();
    let frames: Vec<_> = c.buffer.drain(..c.buffer.len().min(4096)).collect();
    c.delivered += frames.len() as u64;
    CaptureBatch {
        id: c.id,
        done: !c.running && c.buffer.is_empty(),
        captured: c.delivered,
        dropped: c.dropped + router_dropped,
        frames,
        note: None,
    }
}

pub fn capture_read(st: &mut OpsState, id: u64) -> Result<CaptureBatch, ApiError> {
    let c = session(st, id)?;
    let b = batch_of(c, 0);
    if b.done {
        st.capture = None;
    }
    Ok(b)
}

/// Stops a capture; the answer carries the frames not yet read.
pub fn capture_stop(router: &Router, st: &mut OpsState, id: u64) -> Result<CaptureBatch, ApiError> {
    session(st, id)?;
    st.poll(router);
    let c = session(st, id)?;
    c.running = false;
    let port = c.port;
    let lost: u64 = router.lanes().iter().map(|w| w.capture.dropped.load(std::sync::atomic::Ordering::Relaxed)).sum();
    stop_taps(router);
    let mut b = batch_of(c, lost);
    b.done = true;
    log::info!("capture {id} stopped after {} frames (port {port})", b.captured);
    st.capture = None;
    Ok(b)
}
