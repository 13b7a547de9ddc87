//! A port that records what another port receives and transmits (smoltcp's
//! pcap-writer device wrapper): `tern run --capture`, and tests that want
//! to see the frames a real driver exchanged.

use std::io::{self, Write};
use std::os::fd::BorrowedFd;
use std::time::SystemTime;

use tern_packet::{PacketPool, PktIdx, Port, PortStats, TxOutcome};

use crate::pcap::PcapWriter;

/// Which directions a [`CapturePort`] records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureDir {
    Rx,
    Tx,
    Both,
}

/// Wraps `P`, writing every frame it receives and/or is given to transmit
/// to a capture. Forwarding never depends on the capture: after a write
/// error the capture stops (see [`CapturePort::error`]) and the port keeps
/// working.
#[derive(Debug)]
pub struct CapturePort<P: Port, W: Write + Send> {
    inner: P,
    writer: PcapWriter<W>,
    dir: CaptureDir,
    error: Option<io::Error>,
}

impl<P: Port, W: Write + Send> CapturePort<P, W> {
    pub fn new(inner: P, writer: PcapWriter<W>, dir: CaptureDir) -> Self {
        CapturePort { inner, writer, dir, error: None }
    }

    pub fn inner(&self) -> &P {
        &self.inner
    }

    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// The write error that stopped the capture, if any.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Flushes the capture and returns the port and the writer.
    pub fn into_parts(mut self) -> (P, PcapWriter<W>) {
        let _ = self.writer.flush();
        (self.inner, self.writer)
    }

    fn record(&mut self, pool: &PacketPool, pkts: &[PktIdx]) {
        if self.error.is_some() || pkts.is_empty() {
            return;
        }
        let ts = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        for &p in pkts {
            if let Err(e) = self.writer.write_frame(ts, pool.data(p)) {
                self.error = Some(e);
                return;
            }
        }
    }
}

impl<P: Port, W: Write + Send> Port for CapturePort<P, W> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        let start = out.len();
        let n = self.inner.rx_burst(pool, out, max);
        if self.dir != CaptureDir::Tx {
            self.record(pool, out.get(start..).unwrap_or(&[]));
        }
        n
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        if self.dir != CaptureDir::Rx {
            self.record(pool, pkts);
        }
        self.inner.tx_burst(pool, pkts)
    }

    fn service(&mut self, pool: &mut PacketPool) {
        self.inner.service(pool);
    }

    fn prepare_sleep(&mut self) -> bool {
        self.inner.prepare_sleep()
    }

    fn poll_error(&mut self) {
        self.inner.poll_error();
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner.wait_fd()
    }

    fn settled(&self) -> bool {
        self.inner.settled()
    }

    fn stats(&self) -> PortStats {
        self.inner.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemPort;
    use crate::pcap::{PcapReader, TsPrecision};
    use std::io::Cursor;
    use tern_packet::PoolConfig;

    #[test]
    fn records_both_directions_and_forwards_unchanged() {
        let mut pool = PacketPool::new(PoolConfig { frames: 8, ..PoolConfig::default() }).expect("pool");
        let mut mem = MemPort::new("m");
        mem.inject(b"inbound frame");
        let w = PcapWriter::new(Vec::new(), TsPrecision::Micro).expect("header");
        let mut cap = CapturePort::new(mem, w, CaptureDir::Both);
        let mut out = Vec::new();
        assert_eq!(cap.rx_burst(&mut pool, &mut out, 8), 1);
        let reply = pool.alloc_from(b"outbound frame").expect("buf");
        assert_eq!(cap.tx_burst(&mut pool, &[reply]).sent, 1);
        pool.free_all(&out);
        let (mut mem, w) = cap.into_parts();
        assert_eq!(mem.take_sent(), vec![b"outbound frame".to_vec()]);
        let mut r = PcapReader::new(Cursor::new(w.into_inner().expect("flush"))).expect("header");
        let mut buf = Vec::new();
        r.next_record(&mut buf).expect("ok").expect("rx record");
        assert_eq!(buf, b"inbound frame");
        r.next_record(&mut buf).expect("ok").expect("tx record");
        assert_eq!(buf, b"outbound frame");
        assert!(r.next_record(&mut buf).expect("ok").is_none());
    }

    #[test]
    fn rx_only_capture_skips_transmissions() {
        let mut pool = PacketPool::new(PoolConfig { frames: 8, ..PoolConfig::default() }).expect("pool");
        let w = PcapWriter::new(Vec::new(), TsPrecision::Micro).expect("header");
        let mut cap = CapturePort::new(MemPort::new("m"), w, CaptureDir::Rx);
        let p = pool.alloc_from(b"x").expect("buf");
        cap.tx_burst(&mut pool, &[p]);
        let (_, w) = cap.into_parts();
        assert_eq!(w.into_inner().expect("flush").len(), 24, "header only");
    }
}
