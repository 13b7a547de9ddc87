//! The responses kept for retransmitted requests, off the general heap.
//!
//! Every IKE SA keeps its last response (RFC 7296 2.1: a retransmitted
//! request gets it again, byte-identical) for a fixed time after it was
//! sent (`Ike::response_cache_time`, 64 s by default). At a full setup
//! rate that is hundreds of thousands of ~300-byte responses alive at once,
//! each once allocated among the SAs' long-lived objects: when they went,
//! the allocator kept the pages they had shared with those (about 170 bytes
//! a tunnel more at 1M tunnels set up at 6,000/s than slowly).
//!
//! Here they go into append-only chunks (`CHUNK_SIZE` bytes, or one
//! response's size if larger) owned by the engine. Since every response
//! expires a constant time after it was stored, the chunks expire in
//! the order they were filled: a chunk is freed whole when its last
//! entry's time is up, or earlier when every entry in it was replaced
//! (the SA answered another request) or released (the SA went). The SA
//! keeps an 8-byte [`ResponseHandle`] (as small as the `Box` it replaces):
//! the chunk's sequence number and the entry's offset. A handle outliving
//! its chunk finds nothing; one whose sequence number came round again
//! (2^32 chunks later, a petabyte of responses) finds an entry of another
//! owner and gets nothing either: an entry names its SA (our SPI).
//!
//! A chunk starts with its sequence number (so no entry is at offset 0);
//! an entry, as stored: its length, its owner, its expiry (u32 ms after
//! the chunk was started, rounded up), the message ID, the local and
//! remote addresses, the number of datagrams, then each datagram as a u32
//! length and its bytes.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::num::NonZeroU32;
use std::time::{Duration, Instant};

/// A chunk's size: about 800 IKE_AUTH responses; 256 KiB blocks are
/// mapped apart from the small objects' pages, and given back whole.
pub const CHUNK_SIZE: usize = 256 * 1024;

/// Where an SA's cached response is (chunk, offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseHandle {
    seq: u32,
    offset: NonZeroU32,
}

/// Bytes before an entry's addresses: length, owner, expiry, message ID.
const ENTRY_HEAD: usize = 4 + 8 + 4 + 4;

/// A cached response as read back.
pub struct Cached<'a> {
    pub mid: u32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    count: u16,
    rest: &'a [u8],
}

impl<'a> Cached<'a> {
    /// The datagrams, in the order they were sent.
    pub fn datagrams(&self) -> impl Iterator<Item = &'a [u8]> + use<'a> {
        let mut rest = self.rest;
        (0..self.count).map_while(move |_| {
            let (len, r) = take_u32(rest)?;
            let d = r.get(..usize::try_from(len).ok()?)?;
            rest = r.get(d.len()..)?;
            Some(d)
        })
    }
}

struct Chunk {
    data: Vec<u8>,
    /// When it was started (entries' expiry is counted from it).
    born: Instant,
    /// The latest expiry of its entries.
    until: Instant,
    /// Entries neither replaced nor released.
    live: u32,
}

/// The engine's store of cached responses.
pub struct ResponseStore {
    /// Chunks by sequence number (`first` for the front, wrapping);
    /// `None`: freed before the ones in front of it.
    chunks: VecDeque<Option<Chunk>>,
    first: u32,
    chunk_size: usize,
    entries: usize,
    bytes: usize,
}

impl Default for ResponseStore {
    fn default() -> ResponseStore {
        ResponseStore::new(CHUNK_SIZE)
    }
}

impl ResponseStore {
    pub fn new(chunk_size: usize) -> ResponseStore {
        ResponseStore { chunks: VecDeque::new(), first: 0, chunk_size: chunk_size.max(64), entries: 0, bytes: 0 }
    }

    /// Stores `owner`'s response until `until` (`now` or later). `None`
    /// when it cannot be encoded (a datagram of 4 GiB, 65,536 datagrams):
    /// the SA then keeps none, as if it had expired.
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &mut self,
        owner: u64,
        now: Instant,
        until: Instant,
        mid: u32,
        local: SocketAddr,
        remote: SocketAddr,
        datagrams: &[Vec<u8>],
    ) -> Option<ResponseHandle> {
        let count = u16::try_from(datagrams.len()).ok()?;
        let mut len = ENTRY_HEAD + addr_len(local) + addr_len(remote) + 2;
        for d in datagrams {
            u32::try_from(d.len()).ok()?;
            len += 4 + d.len();
        }
        let len32 = u32::try_from(len).ok()?;
        let until = until.max(now);
        let fits = |c: &Chunk| {
            c.data.capacity() - c.data.len() >= len
                && u32::try_from(c.data.len()).is_ok_and(|o| o.checked_add(len32).is_some())
                && until.saturating_duration_since(c.born) < Duration::from_millis(u64::from(u32::MAX))
        };
        if !self.chunks.back().is_some_and(|c| c.as_ref().is_some_and(fits)) {
            // The chunk being filled is done: free it now if nothing in it
            // is wanted any more.
            if let Some(back) = self.chunks.back_mut()
                && back.as_ref().is_some_and(|c| c.live == 0)
                && let Some(c) = back.take()
            {
                self.bytes -= c.data.capacity();
            }
            let seq = self.first.wrapping_add(u32::try_from(self.chunks.len()).ok()?);
            let mut data = Vec::with_capacity(self.chunk_size.max(len + 4));
            data.extend_from_slice(&seq.to_be_bytes());
            self.bytes += data.capacity();
            self.chunks.push_back(Some(Chunk { data, born: now, until, live: 0 }));
            self.trim_front();
        }
        let seq = self.first.wrapping_add(u32::try_from(self.chunks.len()).ok()?.checked_sub(1)?);
        let c = self.chunks.back_mut()?.as_mut()?;
        let offset = NonZeroU32::new(u32::try_from(c.data.len()).ok()?)?;
        let after = until.saturating_duration_since(c.born);
        // Rounded up: an entry never expires before its time.
        let ms = after.as_millis() + u128::from(!after.as_nanos().is_multiple_of(1_000_000));
        let ms = u32::try_from(ms).unwrap_or(u32::MAX);
        let d = &mut c.data;
        d.extend_from_slice(&len32.to_be_bytes());
        d.extend_from_slice(&owner.to_be_bytes());
        d.extend_from_slice(&ms.to_be_bytes());
        d.extend_from_slice(&mid.to_be_bytes());
        put_addr(d, local);
        put_addr(d, remote);
        d.extend_from_slice(&count.to_be_bytes());
        for g in datagrams {
            d.extend_from_slice(&(g.len() as u32).to_be_bytes());
            d.extend_from_slice(g);
        }
        c.live += 1;
        c.until = c.until.max(until);
        self.entries += 1;
        Some(ResponseHandle { seq, offset })
    }

    fn index(&self, seq: u32) -> Option<usize> {
        usize::try_from(seq.wrapping_sub(self.first)).ok().filter(|&i| i < self.chunks.len())
    }

    /// `owner`'s response behind `h`, unless its time is up (at `now`) or
    /// its chunk was freed.
    pub fn get(&self, h: ResponseHandle, owner: u64, now: Instant) -> Option<Cached<'_>> {
        let c = self.chunks.get(self.index(h.seq)?)?.as_ref()?;
        let start = usize::try_from(h.offset.get()).ok()?;
        let (len, _) = take_u32(c.data.get(start..)?)?;
        let end = start.checked_add(usize::try_from(len).ok()?)?;
        let e = c.data.get(start..end)?.get(4..)?;
        let owner_here = u64::from_be_bytes(e.get(..8)?.try_into().ok()?);
        if owner_here != owner {
            return None;
        }
        let (ms, e) = take_u32(e.get(8..)?)?;
        if c.born + Duration::from_millis(u64::from(ms)) <= now {
            return None;
        }
        let (mid, e) = take_u32(e)?;
        let (local, e) = take_addr(e)?;
        let (remote, e) = take_addr(e)?;
        let count = u16::from_be_bytes(e.get(..2)?.try_into().ok()?);
        Some(Cached { mid, local, remote, count, rest: e.get(2..)? })
    }

    /// The SA no longer wants the entry (it has another, or it went).
    pub fn release(&mut self, h: ResponseHandle) {
        let Some(i) = self.index(h.seq) else { return };
        let last = i + 1 == self.chunks.len();
        let Some(slot) = self.chunks.get_mut(i) else { return };
        let Some(c) = slot.as_mut() else { return };
        if c.live == 0 {
            return;
        }
        c.live -= 1;
        self.entries = self.entries.saturating_sub(1);
        // The chunk being filled stays until it is done.
        if c.live == 0
            && !last
            && let Some(c) = slot.take()
        {
            self.bytes -= c.data.capacity();
            self.trim_front();
        }
    }

    /// Frees the chunks whose entries' time is up (in the order they
    /// were filled: a chunk behind one that is not due waits for it).
    pub fn expire(&mut self, now: Instant) {
        while let Some(front) = self.chunks.front() {
            match front {
                Some(c) if c.until > now => break,
                Some(c) => {
                    self.bytes -= c.data.capacity();
                    self.entries = self.entries.saturating_sub(c.live as usize);
                }
                None => {}
            }
            self.chunks.pop_front();
            self.first = self.first.wrapping_add(1);
        }
        if self.chunks.is_empty() && self.chunks.capacity() > 64 {
            self.chunks.shrink_to(64);
        }
    }

    fn trim_front(&mut self) {
        while self.chunks.front().is_some_and(|c| c.is_none()) {
            self.chunks.pop_front();
            self.first = self.first.wrapping_add(1);
        }
    }

    /// When [`ResponseStore::expire`] next frees something.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.chunks.iter().flatten().next().map(|c| c.until)
    }

    /// Entries held (not replaced, released or expired with their chunk),
    /// chunks held, bytes held.
    pub fn usage(&self) -> (usize, usize, usize) {
        (self.entries, self.chunks.iter().flatten().count(), self.bytes)
    }
}

fn addr_len(a: SocketAddr) -> usize {
    match a {
        SocketAddr::V4(_) => 1 + 4 + 2,
        SocketAddr::V6(_) => 1 + 16 + 2 + 4 + 4,
    }
}

fn put_addr(d: &mut Vec<u8>, a: SocketAddr) {
    match a {
        SocketAddr::V4(a) => {
            d.push(4);
            d.extend_from_slice(&a.ip().octets());
            d.extend_from_slice(&a.port().to_be_bytes());
        }
        SocketAddr::V6(a) => {
            d.push(6);
            d.extend_from_slice(&a.ip().octets());
            d.extend_from_slice(&a.port().to_be_bytes());
            d.extend_from_slice(&a.flowinfo().to_be_bytes());
            d.extend_from_slice(&a.scope_id().to_be_bytes());
        }
    }
}

fn take_u32(b: &[u8]) -> Option<(u32, &[u8])> {
    Some((u32::from_be_bytes(b.get(..4)?.try_into().ok()?), b.get(4..)?))
}

fn take_u16(b: &[u8]) -> Option<(u16, &[u8])> {
    Some((u16::from_be_bytes(b.get(..2)?.try_into().ok()?), b.get(2..)?))
}

fn take_addr(b: &[u8]) -> Option<(SocketAddr, &[u8])> {
    let (&kind, b) = b.split_first()?;
    match kind {
        4 => {
            let ip: [u8; 4] = b.get(..4)?.try_into().ok()?;
            let (port, b) = take_u16(b.get(4..)?)?;
            Some((SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)), b))
        }
        6 => {
            let ip: [u8; 16] = b.get(..16)?.try_into().ok()?;
            let (port, b) = take_u16(b.get(16..)?)?;
            let (flow, b) = take_u32(b)?;
            let (scope, b) = take_u32(b)?;
            Some((SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, flow, scope)), b))
        }
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(64);
    const OWNER: u64 = 0x1234_5678_9abc_def0;

    fn a4(port: u16) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, 1], port))
    }

    fn a6() -> SocketAddr {
        SocketAddr::V6(SocketAddrV6::new("2001:db8::7".parse().unwrap(), 4500, 3, 9))
    }

    fn read(s: &ResponseStore, h: ResponseHandle, now: Instant) -> Option<(u32, SocketAddr, SocketAddr, Vec<Vec<u8>>)> {
        let c = s.get(h, OWNER, now)?;
        Some((c.mid, c.local, c.remote, c.datagrams().map(<[u8]>::to_vec).collect()))
    }

    #[test]
    fn an_entry_reads_back_as_stored() {
        let mut s = ResponseStore::default();
        let t = Instant::now();
        let ds = vec![vec![1u8; 300], vec![], vec![2u8; 7]];
        let h = s.put(OWNER, t, t + TTL, 42, a4(500), a6(), &ds).unwrap();
        let h2 = s.put(OWNER, t, t + TTL, 7, a6(), a4(4500), &ds[..1]).unwrap();
        assert_eq!(read(&s, h, t), Some((42, a4(500), a6(), ds.clone())));
        assert_eq!(read(&s, h2, t + TTL - Duration::from_millis(1)), Some((7, a6(), a4(4500), ds[..1].to_vec())));
        assert_eq!(s.usage().0, 2);
        assert_eq!(s.usage().1, 1, "both in one chunk");
    }

    #[test]
    fn an_expired_entry_reads_as_nothing_and_its_chunk_goes() {
        let mut s = ResponseStore::default();
        let t = Instant::now();
        let h = s.put(OWNER, t, t + TTL, 1, a4(500), a4(500), &[vec![9u8; 100]]).unwrap();
        assert!(s.get(h, OWNER, t + TTL - Duration::from_millis(1)).is_some());
        assert!(s.get(h, OWNER, t + TTL).is_none(), "its time is up, even before the chunk is freed");
        assert_eq!(s.next_expiry(), Some(t + TTL));
        s.expire(t + TTL - Duration::from_millis(1));
        assert_eq!(s.usage().1, 1);
        s.expire(t + TTL);
        assert_eq!(s.usage(), (0, 0, 0));
        assert!(s.get(h, OWNER, t).is_none(), "freed: nothing, whatever the time");
        assert_eq!(s.next_expiry(), None);
        // Releasing a handle of a freed chunk changes nothing.
        s.release(h);
        assert_eq!(s.usage(), (0, 0, 0));
    }

    /// A stale handle never reads what came after it: sequence numbers
    /// are not reused, even when the chunk's memory is.
    #[test]
    fn a_stale_handle_never_reads_another_entry() {
        let mut s = ResponseStore::new(1000);
        let t = Instant::now();
        let old = s.put(OWNER, t, t + TTL, 1, a4(500), a4(500), &[vec![1u8; 100]]).unwrap();
        s.expire(t + TTL);
        let new = s.put(OWNER, t + TTL, t + 2 * TTL, 2, a4(500), a4(500), &[vec![2u8; 100]]).unwrap();
        assert_ne!(old, new);
        assert!(s.get(old, OWNER, t + TTL).is_none());
        assert_eq!(read(&s, new, t + TTL).unwrap().0, 2);
        // Released: the chunk being filled stays, its entry is still read
        // (the SA has replaced its handle, nobody asks for it).
        s.release(new);
        assert_eq!(s.usage().0, 0);
        s.release(new);
        assert_eq!(s.usage().0, 0, "a second release counts nothing");
    }

    /// Chunks fill in order; one whose entries were all replaced or
    /// released is freed at once, the others when their time is up.
    #[test]
    fn chunks_go_when_emptied_or_expired() {
        let mut s = ResponseStore::new(1000);
        let t = Instant::now();
        let mut hs = Vec::new();
        for k in 0..40u32 {
            let now = t + Duration::from_millis(u64::from(k));
            hs.push(s.put(OWNER, now, now + TTL, k, a4(500), a4(500), &[vec![k as u8; 200]]).unwrap());
        }
        let (entries, chunks, bytes) = s.usage();
        assert_eq!(entries, 40);
        assert!(chunks >= 8, "{chunks} chunks");
        assert_eq!(bytes, chunks * 1000);
        // Release all but the last entry: every chunk but the last goes.
        for h in &hs[..39] {
            s.release(*h);
        }
        assert_eq!(s.usage().1, 1);
        assert_eq!(read(&s, hs[39], t).unwrap().3, vec![vec![39u8; 200]]);
        assert!(s.get(hs[0], OWNER, t).is_none(), "its chunk was freed");
        // A big entry gets a chunk of its own size.
        let big = vec![vec![5u8; 3000], vec![6u8; 3000]];
        let hb = s.put(OWNER, t, t + TTL, 99, a4(4500), a4(4500), &big).unwrap();
        assert_eq!(read(&s, hb, t).unwrap().3, big);
        s.expire(t + TTL + Duration::from_millis(39));
        assert_eq!(s.usage(), (0, 0, 0));
    }

    /// A handle read by another SA (or a sequence number come round
    /// again) finds an entry of another owner: nothing. Handles made up
    /// of any offset or sequence number read nothing or garbage, never
    /// a panic.
    #[test]
    fn only_the_owner_reads_its_entry_and_bad_handles_never_panic() {
        let mut s = ResponseStore::new(4096);
        let t = Instant::now();
        let h = s.put(OWNER, t, t + TTL, 1, a4(500), a4(500), &[vec![1u8; 10]]).unwrap();
        let h2 = s.put(OWNER + 1, t, t + TTL, 2, a4(500), a4(500), &[vec![2u8; 10]]).unwrap();
        assert!(s.get(h, OWNER + 1, t).is_none());
        assert!(s.get(h2, OWNER, t).is_none());
        assert_eq!(read(&s, h, t).unwrap().0, 1);
        for seq in [0u32, 1, 2, u32::MAX] {
            for offset in (1..5000u32).step_by(3) {
                let bad = ResponseHandle { seq, offset: NonZeroU32::new(offset).unwrap() };
                if let Some(c) = s.get(bad, OWNER, t) {
                    let _ = c.datagrams().count();
                }
                let _ = s.get(bad, u64::from_be_bytes([1u8; 8]), t).map(|c| c.datagrams().count());
            }
        }
        s.release(ResponseHandle { seq: 7, offset: NonZeroU32::MIN });
        assert_eq!(s.usage().0, 2);
    }
}
