//! pcap capture files: reading ([`PcapReader`], [`PcapRxPort`]) and writing
//! ([`PcapWriter`], [`PcapTxPort`]).
//!
//! The classic libpcap format (not pcapng). The encoding and decoding of
//! file and record headers is the `pcap-file` crate's (both byte orders,
//! microsecond and nanosecond magic numbers); what is tern's here is the
//! policy around it and the ports. Only link type 1 (Ethernet) is accepted
//! by [`PcapRxPort`]: tern's nodes start at the Ethernet header.
//!
//! Reading never trusts the file: a record longer than
//! [`MAX_RECORD_LEN`] (libpcap's own limit) is an error, a record that
//! claims more bytes than the reader's fixed buffer holds is an error
//! rather than an allocation, a short read is an error, and errors end
//! the stream (the port counts them; nothing panics). Unlike `pcap-file`'s
//! own checked packet type, records whose original length exceeds the
//! snap length (a capture of GRO-merged frames) and timestamp fractions of
//! a second or more (bad writers) are read, not refused.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Cursor, Read, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use pcap_file::pcap::{PcapHeader as FileHeader, RawPcapPacket};
use pcap_file::{DataLink, Endianness, TsResolution};
use tern_packet::{PacketPool, PktIdx, Port, PortStats, TxOutcome};

/// Link type of Ethernet captures (LINKTYPE_ETHERNET).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Longest record accepted (libpcap's MAXIMUM_SNAPLEN).
pub const MAX_RECORD_LEN: u32 = 262_144;

const MAGIC_MICRO: u32 = 0xa1b2_c3d4;
const MAGIC_NANO: u32 = 0xa1b2_3c4d;
const MAGIC_PCAPNG: u32 = 0x0a0d_0d0a;

/// Timestamp resolution of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsPrecision {
    Micro,
    Nano,
}

impl TsPrecision {
    fn resolution(self) -> TsResolution {
        match self {
            TsPrecision::Micro => TsResolution::MicroSecond,
            TsPrecision::Nano => TsResolution::NanoSecond,
        }
    }
}

/// Why a capture could not be read or written.
#[derive(Debug)]
pub enum PcapError {
    Io(io::Error),
    /// Not a pcap file (the magic number).
    BadMagic(u32),
    /// A pcapng file; convert it with `editcap -F pcap in.pcapng out.pcap`.
    Pcapng,
    /// Not major version 2.
    BadVersion(u16, u16),
    /// A link type other than Ethernet.
    LinkType(u32),
    /// A record longer than [`MAX_RECORD_LEN`]: a corrupt file.
    RecordTooLong(u32),
    /// The file ends inside a header or a record (or a record claims more
    /// bytes than any reader buffers).
    Truncated,
    /// A field the decoder refused.
    Invalid(&'static str),
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::Io(e) => write!(f, "{e}"),
            PcapError::BadMagic(m) => write!(f, "not a pcap file (magic number {m:#010x})"),
            PcapError::Pcapng => write!(f, "pcapng is not supported; convert with `editcap -F pcap IN OUT`"),
            PcapError::BadVersion(a, b) => write!(f, "unsupported pcap version {a}.{b}"),
            PcapError::LinkType(t) => {
                write!(f, "link type {t} is not Ethernet ({LINKTYPE_ETHERNET})")
            }
            PcapError::RecordTooLong(n) => write!(f, "record of {n} bytes exceeds {MAX_RECORD_LEN}: corrupt file"),
            PcapError::Truncated => write!(f, "file ends inside a record"),
            PcapError::Invalid(why) => write!(f, "corrupt capture: {why}"),
        }
    }
}

impl std::error::Error for PcapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PcapError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for PcapError {
    fn from(e: io::Error) -> PcapError {
        if e.kind() == io::ErrorKind::UnexpectedEof { PcapError::Truncated } else { PcapError::Io(e) }
    }
}

impl From<pcap_file::PcapError> for PcapError {
    fn from(e: pcap_file::PcapError) -> PcapError {
        match e {
            pcap_file::PcapError::IoError(e) => e.into(),
            pcap_file::PcapError::IncompleteBuffer => PcapError::Truncated,
            pcap_file::PcapError::InvalidField(why) => PcapError::Invalid(why),
            other => PcapError::Io(io::Error::other(other)),
        }
    }
}

/// A `pcap-file` error on the write side, as the `io::Error` writers give.
fn write_error(e: pcap_file::PcapError) -> io::Error {
    match e {
        pcap_file::PcapError::IoError(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidInput, other),
    }
}

fn native() -> Endianness {
    if cfg!(target_endian = "little") { Endianness::Little } else { Endianness::Big }
}

/// The file header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PcapHeader {
    pub precision: TsPrecision,
    /// Written on a host of the other byte order.
    pub swapped: bool,
    pub version: (u16, u16),
    pub snaplen: u32,
    pub linktype: u32,
}

/// One record header, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    /// Capture time since the Unix epoch.
    pub ts: Duration,
    /// Bytes stored in the file.
    pub incl_len: u32,
    /// Bytes the frame had on the wire (more when the capture truncated it).
    pub orig_len: u32,
}

/// The byte source `pcap-file` reads: the 24 header bytes tern already
/// read (to name pcapng and truncation precisely), then the rest.
type Source<R> = io::Chain<Cursor<[u8; 24]>, R>;

/// Reads records from a capture.
#[derive(Debug)]
pub struct PcapReader<R: Read> {
    inner: pcap_file::pcap::PcapReader<Source<R>>,
    header: PcapHeader,
}

impl PcapReader<BufReader<File>> {
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        PcapReader::new(BufReader::with_capacity(1 << 16, File::open(path)?))
    }
}

impl<R: Read> PcapReader<R> {
    /// Reads and checks the file header (any link type).
    pub fn new(mut r: R) -> Result<Self, PcapError> {
        let mut b = [0u8; 24];
        r.read_exact(&mut b)?;
        let be = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        match (be, be.swap_bytes()) {
            (MAGIC_PCAPNG, _) => return Err(PcapError::Pcapng),
            (MAGIC_MICRO | MAGIC_NANO, _) | (_, MAGIC_MICRO | MAGIC_NANO) => {}
            _ => return Err(PcapError::BadMagic(be)),
        }
        let inner = pcap_file::pcap::PcapReader::new(Cursor::new(b).chain(r))?;
        let h = inner.header();
        if h.version_major != 2 {
            return Err(PcapError::BadVersion(h.version_major, h.version_minor));
        }
        let header = PcapHeader {
            precision: match h.ts_resolution {
                TsResolution::MicroSecond => TsPrecision::Micro,
                TsResolution::NanoSecond => TsPrecision::Nano,
            },
            swapped: h.endianness != native(),
            version: (h.version_major, h.version_minor),
            snaplen: h.snaplen,
            linktype: u32::from(h.datalink),
        };
        Ok(PcapReader { inner, header })
    }

    pub fn header(&self) -> &PcapHeader {
        &self.header
    }

    /// Hands the next record to `f`, `None` at the end of the file.
    fn next_with<T>(&mut self, f: impl FnOnce(RecordHeader, &[u8]) -> T) -> Result<Option<T>, PcapError> {
        let p = match self.inner.next_raw_packet() {
            None => return Ok(None),
            Some(p) => p?,
        };
        if p.incl_len > MAX_RECORD_LEN {
            return Err(PcapError::RecordTooLong(p.incl_len));
        }
        let nanos = match self.header.precision {
            TsPrecision::Micro => u64::from(p.ts_frac) * 1000,
            TsPrecision::Nano => u64::from(p.ts_frac),
        };
        // A fraction of a second or more (bad writers) carries into seconds.
        let ts = Duration::from_secs(u64::from(p.ts_sec)) + Duration::from_nanos(nanos);
        let h = RecordHeader { ts, incl_len: p.incl_len, orig_len: p.orig_len };
        Ok(Some(f(h, &p.data)))
    }

    /// The next record into `buf` (replacing its contents); `None` at the
    /// end of the file.
    pub fn next_record(&mut self, buf: &mut Vec<u8>) -> Result<Option<RecordHeader>, PcapError> {
        self.next_with(|h, data| {
            buf.clear();
            buf.extend_from_slice(data);
            h
        })
    }
}

/// Writes a capture (Ethernet link type).
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    w: W,
    precision: TsPrecision,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) `path`.
    pub fn create(path: impl AsRef<Path>, precision: TsPrecision) -> io::Result<Self> {
        PcapWriter::new(BufWriter::with_capacity(1 << 16, File::create(path)?), precision)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header (native byte order, snaplen
    /// [`MAX_RECORD_LEN`], Ethernet).
    pub fn new(mut w: W, precision: TsPrecision) -> io::Result<Self> {
        FileHeader {
            version_major: 2,
            version_minor: 4,
            ts_correction: 0,
            ts_accuracy: 0,
            snaplen: MAX_RECORD_LEN,
            datalink: DataLink::ETHERNET,
            ts_resolution: precision.resolution(),
            endianness: native(),
        }
        .write_to(&mut w)
        .map_err(write_error)?;
        Ok(PcapWriter { w, precision })
    }

    /// Appends a frame captured whole at `ts` (since the Unix epoch).
    pub fn write_frame(&mut self, ts: Duration, frame: &[u8]) -> io::Result<()> {
        self.write_record(ts, frame, frame.len())
    }

    /// Appends a frame stamped with the current time.
    pub fn write_frame_now(&mut self, frame: &[u8]) -> io::Result<()> {
        self.write_frame(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default(), frame)
    }

    /// Appends `data`, the first bytes of a frame of `orig_len` bytes.
    pub fn write_record(&mut self, ts: Duration, data: &[u8], orig_len: usize) -> io::Result<()> {
        let incl = u32::try_from(data.len())
            .ok()
            .filter(|&n| n <= MAX_RECORD_LEN)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "record longer than 262144 bytes"))?;
        let orig = u32::try_from(orig_len.max(data.len())).unwrap_or(u32::MAX);
        // Seconds wrap after 2106 in this format; saturate instead (the
        // raw record, not `pcap-file`'s checked one, which would refuse).
        let ts_sec = u32::try_from(ts.as_secs()).unwrap_or(u32::MAX);
        let ts_frac = match self.precision {
            TsPrecision::Micro => ts.subsec_micros(),
            TsPrecision::Nano => ts.subsec_nanos(),
        };
        let rec = RawPcapPacket { ts_sec, ts_frac, incl_len: incl, orig_len: orig, data: Cow::Borrowed(data) };
        rec.write_to::<_, byteorder_slice::NativeEndian>(&mut self.w).map(drop).map_err(write_error)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    pub fn get_ref(&self) -> &W {
        &self.w
    }

    /// Flushes and returns the inner writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.w.flush()?;
        Ok(self.w)
    }
}

/// A port that receives the frames of a capture file, in order, once.
///
/// Frames longer than a pool buffer are dropped and counted. A read error
/// (corrupt or truncated file) is counted in `errors` and ends the stream;
/// [`PcapRxPort::error`] tells what it was. A record is read only once a
/// buffer for it is in hand, so an empty pool loses nothing.
#[derive(Debug)]
pub struct PcapRxPort<R: Read = BufReader<File>> {
    name: String,
    reader: PcapReader<R>,
    done: bool,
    error: Option<PcapError>,
    stats: PortStats,
}

impl PcapRxPort<BufReader<File>> {
    /// Opens an Ethernet capture.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        let p = path.as_ref();
        PcapRxPort::from_reader(p.display().to_string(), BufReader::with_capacity(1 << 16, File::open(p)?))
    }
}

impl<R: Read + Send> PcapRxPort<R> {
    /// Reads an Ethernet capture from `r`.
    pub fn from_reader(name: impl Into<String>, r: R) -> Result<Self, PcapError> {
        let reader = PcapReader::new(r)?;
        if reader.header().linktype != LINKTYPE_ETHERNET {
            return Err(PcapError::LinkType(reader.header().linktype));
        }
        Ok(PcapRxPort { name: name.into(), reader, done: false, error: None, stats: PortStats::default() })
    }

    /// True once every record was read (or an error ended the stream).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The error that ended the stream early, if any.
    pub fn error(&self) -> Option<&PcapError> {
        self.error.as_ref()
    }

    fn fail(&mut self, e: PcapError) {
        self.stats.errors += 1;
        self.error = Some(e);
        self.done = true;
    }
}

impl<R: Read + Send> Port for PcapRxPort<R> {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, pool: &mut PacketPool, out: &mut Vec<PktIdx>, max: usize) -> usize {
        let head = usize::from(pool.headroom());
        let room = pool.frame_size() as usize - head;
        let mut n = 0;
        while n < max && !self.done {
            let Some(idx) = pool.alloc() else { break };
            let frame = pool.frame_mut(idx);
            // Some(len) when the record fit and was copied, None when not.
            let got = self.reader.next_with(|_, data| {
                let dst = frame.get_mut(head..head + data.len()).filter(|_| data.len() <= room)?;
                dst.copy_from_slice(data);
                Some(data.len())
            });
            let len = match got {
                Ok(Some(Some(len))) => len,
                Ok(Some(None)) => {
                    pool.free(idx);
                    self.stats.rx_dropped += 1;
                    continue;
                }
                Ok(None) => {
                    pool.free(idx);
                    self.done = true;
                    break;
                }
                Err(e) => {
                    pool.free(idx);
                    self.fail(e);
                    break;
                }
            };
            pool.set_data(idx, head as u16, len as u16);
            out.push(idx);
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            n += 1;
        }
        n
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        // A capture being read cannot be written to.
        pool.free_all(pkts);
        self.stats.tx_dropped += pkts.len() as u64;
        TxOutcome { sent: 0, dropped: pkts.len() }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Timestamps a [`PcapTxPort`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Timestamps {
    /// The wall clock at each transmit burst.
    Wall,
    /// Always this time: byte-identical output for golden-file tests.
    Fixed(Duration),
}

/// A port that writes every transmitted frame to a capture file.
///
/// A write error (disk full) is counted in `errors`, the frames of that
/// burst and every later one are dropped and counted, and
/// [`PcapTxPort::error`] tells what happened: a capture with a hole in the
/// middle would mislead more than one that stops.
#[derive(Debug)]
pub struct PcapTxPort<W: Write = BufWriter<File>> {
    name: String,
    writer: PcapWriter<W>,
    timestamps: Timestamps,
    error: Option<io::Error>,
    stats: PortStats,
}

impl PcapTxPort<BufWriter<File>> {
    /// Creates (truncates) `path`, microsecond timestamps from the wall clock.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        let p = path.as_ref();
        Ok(PcapTxPort::from_writer(p.display().to_string(), PcapWriter::create(p, TsPrecision::Micro)?))
    }
}

impl<W: Write + Send> PcapTxPort<W> {
    pub fn from_writer(name: impl Into<String>, writer: PcapWriter<W>) -> Self {
        PcapTxPort { name: name.into(), writer, timestamps: Timestamps::Wall, error: None, stats: PortStats::default() }
    }

    pub fn set_timestamps(&mut self, t: Timestamps) {
        self.timestamps = t;
    }

    /// Flushes buffered records to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// The write error that stopped the capture, if any.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
    }

    /// Flushes and returns the writer.
    pub fn into_writer(self) -> io::Result<PcapWriter<W>> {
        let mut w = self.writer;
        w.flush()?;
        Ok(w)
    }
}

impl<W: Write + Send> Port for PcapTxPort<W> {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _pool: &mut PacketPool, _out: &mut Vec<PktIdx>, _max: usize) -> usize {
        0
    }

    fn tx_burst(&mut self, pool: &mut PacketPool, pkts: &[PktIdx]) -> TxOutcome {
        let ts = match self.timestamps {
            Timestamps::Wall => SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default(),
            Timestamps::Fixed(t) => t,
        };
        let mut sent = 0;
        if self.error.is_none() {
            for &p in pkts {
                let data = pool.data(p);
                if let Err(e) = self.writer.write_frame(ts, data) {
                    self.stats.errors += 1;
                    self.error = Some(e);
                    break;
                }
                self.stats.tx_bytes += data.len() as u64;
                sent += 1;
            }
        }
        pool.free_all(pkts);
        let dropped = pkts.len() - sent;
        self.stats.tx_packets += sent as u64;
        self.stats.tx_dropped += dropped as u64;
        TxOutcome { sent, dropped }
    }

    fn service(&mut self, _pool: &mut PacketPool) {}

    fn stats(&self) -> PortStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Cursor;
    use tern_packet::PoolConfig;

    fn pool(frames: u32) -> PacketPool {
        PacketPool::new(PoolConfig { frames, ..PoolConfig::default() }).expect("pool")
    }

    fn capture(precision: TsPrecision, frames: &[(Duration, Vec<u8>)]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new(), precision).expect("header");
        for (ts, f) in frames {
            w.write_frame(*ts, f).expect("record");
        }
        w.into_inner().expect("flush")
    }

    #[test]
    fn round_trip_micro_and_nano() {
        let frames = vec![
            (Duration::new(1_700_000_000, 123_456_789), vec![1u8; 60]),
            (Duration::new(1_700_000_001, 0), vec![2u8; 1514]),
        ];
        for (prec, want_frac) in [(TsPrecision::Micro, 123_456_000), (TsPrecision::Nano, 123_456_789)] {
            let bytes = capture(prec, &frames);
            let mut r = PcapReader::new(Cursor::new(bytes)).expect("header");
            assert_eq!(r.header().precision, prec);
            assert_eq!(r.header().linktype, LINKTYPE_ETHERNET);
            let mut buf = Vec::new();
            let h = r.next_record(&mut buf).expect("ok").expect("record");
            assert_eq!(h.ts, Duration::new(1_700_000_000, want_frac));
            assert_eq!(buf, frames[0].1);
            let h = r.next_record(&mut buf).expect("ok").expect("record");
            assert_eq!((h.incl_len, h.orig_len), (1514, 1514));
            assert_eq!(buf, frames[1].1);
            assert!(r.next_record(&mut buf).expect("ok").is_none());
        }
    }

    /// A big-endian capture written by hand: magic a1b2c3d4 in big-endian
    /// order, one 4-byte record.
    #[test]
    fn reads_the_other_byte_order() {
        let mut b = vec![0xa1, 0xb2, 0xc3, 0xd4, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 1];
        b.extend_from_slice(&[0, 0, 0, 10, 0, 0, 0, 5, 0, 0, 0, 4, 0, 0, 0, 4, 9, 8, 7, 6]);
        let mut r = PcapReader::new(Cursor::new(b)).expect("header");
        assert_eq!(r.header().swapped, cfg!(target_endian = "little"));
        assert_eq!(r.header().snaplen, 65535);
        let mut buf = Vec::new();
        let h = r.next_record(&mut buf).expect("ok").expect("record");
        assert_eq!(h.ts, Duration::new(10, 5_000));
        assert_eq!(buf, [9, 8, 7, 6]);
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(matches!(PcapReader::new(Cursor::new(vec![0u8; 10])), Err(PcapError::Truncated)));
        assert!(matches!(PcapReader::new(Cursor::new(vec![0u8; 24])), Err(PcapError::BadMagic(0))));
        let mut v3 = capture(TsPrecision::Micro, &[]);
        v3[4..6].copy_from_slice(&3u16.to_ne_bytes());
        assert!(matches!(PcapReader::new(Cursor::new(v3)), Err(PcapError::BadVersion(3, 4))));
        let ng = [0x0a, 0x0d, 0x0d, 0x0a].iter().copied().chain([0u8; 20]).collect::<Vec<_>>();
        assert!(matches!(PcapReader::new(Cursor::new(ng)), Err(PcapError::Pcapng)));
        let mut raw_ip = capture(TsPrecision::Micro, &[]);
        raw_ip[20..24].copy_from_slice(&101u32.to_ne_bytes());
        assert!(matches!(PcapRxPort::from_reader("x", Cursor::new(raw_ip)), Err(PcapError::LinkType(101))));
    }

    #[test]
    fn rx_port_delivers_frames_then_ends() {
        let frames: Vec<_> = (0..5u8).map(|i| (Duration::ZERO, vec![i; 64 + usize::from(i)])).collect();
        let mut port = PcapRxPort::from_reader("t", Cursor::new(capture(TsPrecision::Nano, &frames))).expect("open");
        let mut p = pool(16);
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 3), 3);
        assert!(!port.is_done());
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 2);
        assert!(port.is_done());
        assert!(port.error().is_none());
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 0);
        for (i, &idx) in out.iter().enumerate() {
            assert_eq!(p.data(idx), &frames[i].1[..]);
            assert_eq!(p.meta(idx).off, p.headroom());
        }
        assert_eq!(port.stats().rx_packets, 5);
    }

    #[test]
    fn rx_port_keeps_a_record_when_the_pool_is_empty() {
        let frames: Vec<_> = (0..3u8).map(|i| (Duration::ZERO, vec![i; 60])).collect();
        let mut port = PcapRxPort::from_reader("t", Cursor::new(capture(TsPrecision::Micro, &frames))).expect("open");
        let mut p = pool(2);
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 2);
        p.free_all(&out);
        out.clear();
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 1);
        assert_eq!(p.data(out[0])[0], 2, "the third record was not lost");
    }

    #[test]
    fn rx_port_drops_oversized_and_counts_truncation() {
        let frames = vec![(Duration::ZERO, vec![1u8; 1900]), (Duration::ZERO, vec![2u8; 100])];
        let mut bytes = capture(TsPrecision::Micro, &frames);
        bytes.truncate(bytes.len() - 10); // the last record is cut short
        let mut port = PcapRxPort::from_reader("t", Cursor::new(bytes)).expect("open");
        let mut p = pool(4);
        let mut out = Vec::new();
        assert_eq!(port.rx_burst(&mut p, &mut out, 8), 0);
        let s = port.stats();
        assert_eq!((s.rx_dropped, s.errors), (1, 1));
        assert!(matches!(port.error(), Some(PcapError::Truncated)));
        assert!(port.is_done());
        assert_eq!(p.available(), 4, "the buffer of the cut record was freed");
    }

    #[test]
    fn tx_port_writes_a_readable_capture_with_fixed_time() {
        let mut p = pool(8);
        let w = PcapWriter::new(Vec::new(), TsPrecision::Micro).expect("header");
        let mut port = PcapTxPort::from_writer("out", w);
        port.set_timestamps(Timestamps::Fixed(Duration::from_secs(42)));
        let pkts = [p.alloc_from(b"first").expect("buf"), p.alloc_from(b"second").expect("buf")];
        assert_eq!(port.tx_burst(&mut p, &pkts), TxOutcome { sent: 2, dropped: 0 });
        assert_eq!(p.available(), 8);
        let bytes = port.into_writer().expect("flush").into_inner().expect("inner");
        let mut r = PcapReader::new(Cursor::new(bytes)).expect("header");
        let mut buf = Vec::new();
        assert_eq!(r.next_record(&mut buf).expect("ok").expect("rec").ts, Duration::from_secs(42));
        assert_eq!(buf, b"first");
        r.next_record(&mut buf).expect("ok").expect("rec");
        assert_eq!(buf, b"second");
    }

    /// A writer that fails after `ok` bytes.
    struct Full {
        ok: usize,
    }
    impl Write for Full {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.ok == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = b.len().min(self.ok);
            self.ok -= n;
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn tx_port_stops_and_counts_on_write_error() {
        let mut p = pool(8);
        let w = PcapWriter::new(Full { ok: 24 + 16 + 60 + 10 }, TsPrecision::Micro).expect("header");
        let mut port = PcapTxPort::from_writer("full", w);
        let pkts: Vec<_> = (0..3).map(|_| p.alloc_from(&[0u8; 60]).expect("buf")).collect();
        assert_eq!(port.tx_burst(&mut p, &pkts), TxOutcome { sent: 1, dropped: 2 });
        let more = [p.alloc_from(&[0u8; 60]).expect("buf")];
        assert_eq!(port.tx_burst(&mut p, &more), TxOutcome { sent: 0, dropped: 1 });
        assert_eq!(p.available(), 8);
        let s = port.stats();
        assert_eq!((s.tx_packets, s.tx_dropped, s.errors), (1, 3, 1));
        assert_eq!(port.error().and_then(io::Error::raw_os_error), Some(libc::ENOSPC));
    }

    #[test]
    fn huge_record_length_is_an_error_not_an_allocation() {
        // A length no file backs: the fixed read buffer runs dry first.
        let mut bytes = capture(TsPrecision::Micro, &[(Duration::ZERO, vec![0u8; 4])]);
        bytes[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_ne_bytes());
        let mut r = PcapReader::new(Cursor::new(bytes)).expect("header");
        let mut buf = Vec::new();
        assert!(matches!(r.next_record(&mut buf), Err(PcapError::Truncated)));
        // A record that is there but longer than libpcap allows.
        let mut bytes = capture(TsPrecision::Micro, &[]);
        let n = MAX_RECORD_LEN + 1;
        for v in [0, 0, n, n] {
            bytes.extend_from_slice(&v.to_ne_bytes());
        }
        bytes.resize(bytes.len() + n as usize, 0);
        let mut r = PcapReader::new(Cursor::new(bytes)).expect("header");
        assert!(matches!(r.next_record(&mut buf), Err(PcapError::RecordTooLong(len)) if len == n));
        assert!(buf.is_empty(), "nothing was copied");
    }

    /// The bytes written are libpcap's: the header and record layout tern
    /// wrote by hand before `pcap-file` did it (native order, version 2.4,
    /// snaplen 262144, Ethernet), byte for byte.
    #[test]
    fn writer_output_is_byte_identical_to_the_libpcap_layout() {
        let bytes = capture(TsPrecision::Nano, &[(Duration::new(7, 9), vec![0xab; 3])]);
        let mut want = MAGIC_NANO.to_ne_bytes().to_vec();
        want.extend_from_slice(&2u16.to_ne_bytes());
        want.extend_from_slice(&4u16.to_ne_bytes());
        for v in [0u32, 0, MAX_RECORD_LEN, LINKTYPE_ETHERNET] {
            want.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [7u32, 9, 3, 3] {
            want.extend_from_slice(&v.to_ne_bytes());
        }
        want.extend_from_slice(&[0xab; 3]);
        assert_eq!(bytes, want);
    }

    #[test]
    fn records_beyond_the_snap_length_and_odd_fractions_are_read() {
        // orig_len above snaplen (GRO-merged frames) and a microsecond
        // fraction of a whole second: pcap-file's checked packet refuses
        // both, tern reads them.
        let mut b = capture(TsPrecision::Micro, &[]);
        for v in [5u32, 1_500_000, 2, 70_000] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&[1, 2]);
        let mut r = PcapReader::new(Cursor::new(b)).expect("header");
        let mut buf = Vec::new();
        let h = r.next_record(&mut buf).expect("ok").expect("record");
        assert_eq!((h.ts, h.incl_len, h.orig_len), (Duration::new(6, 500_000_000), 2, 70_000));
        assert_eq!(buf, [1, 2]);
    }

    proptest! {
        /// Any bytes: the reader and the port end (error or end of file)
        /// without panicking, and every packet delivered fits its buffer.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096), valid_header in any::<bool>()) {
            let mut input = if valid_header { capture(TsPrecision::Micro, &[]) } else { Vec::new() };
            input.extend_from_slice(&bytes);
            let mut buf = Vec::new();
            if let Ok(mut r) = PcapReader::new(Cursor::new(input.clone())) {
                while let Ok(Some(_)) = r.next_record(&mut buf) {}
            }
            if let Ok(mut port) = PcapRxPort::from_reader("fuzz", Cursor::new(input)) {
                let mut p = pool(64);
                let mut out = Vec::new();
                while !port.is_done() {
                    port.rx_burst(&mut p, &mut out, 64);
                    for &i in &out {
                        prop_assert!(p.data(i).len() <= (p.frame_size() - u32::from(p.headroom())) as usize);
                    }
                    p.free_all(&out);
                    out.clear();
                }
            }
        }

        /// What the writer writes the reader reads back, frame for frame.
        #[test]
        fn write_then_read_is_identity(
            frames in proptest::collection::vec((any::<u32>(), 0u32..1_000_000_000, proptest::collection::vec(any::<u8>(), 0..2000)), 0..20),
            nano in any::<bool>(),
        ) {
            let prec = if nano { TsPrecision::Nano } else { TsPrecision::Micro };
            let frames: Vec<_> = frames.into_iter().map(|(s, ns, f)| (Duration::new(u64::from(s), ns), f)).collect();
            let mut r = PcapReader::new(Cursor::new(capture(prec, &frames))).expect("header");
            let mut buf = Vec::new();
            for (ts, f) in &frames {
                let h = r.next_record(&mut buf).expect("ok").expect("record");
                let want = if nano { *ts } else { Duration::new(ts.as_secs(), ts.subsec_micros() * 1000) };
                prop_assert_eq!(h.ts, want);
                prop_assert_eq!(&buf, f);
            }
            prop_assert!(r.next_record(&mut buf).expect("ok").is_none());
        }
    }
}
