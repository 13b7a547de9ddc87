//! The reassembly table of one worker: IPv4 (RFC 791, RFC 815) or IPv6
//! (RFC 8200 4.5, RFC 5722) fragments in, whole datagrams out.
//!
//! Plain bytes in and out, no engine types, so that the fuzz target
//! (`crates/nodes/fuzz`) includes this file alone.
//!
//! Bounds, all in [`Limits`]: `datagrams` in reassembly at once (a new one
//! past that evicts the oldest), `per_source` of them from one source (an
//! IPv4 address, an IPv6 /64: a source past its share is refused, so one
//! sender, or one spoofing from inside its /64, cannot fill the table),
//! `max_size` bytes of payload (RFC 8200's 65535 at most), `max_frags`
//! fragments in one datagram, and `timeout_ns` from a datagram's first
//! fragment to its last. Memory is at most `datagrams * max_size` bytes
//! of buffers plus the entries. A flood of spoofed sources ages real
//! datagrams out only if it brings `datagrams` new ones between a real
//! datagram's first and last fragment.
//!
//! Overlapping fragments drop the whole datagram, and the fragments of
//! it that come later until its timeout (RFC 5722, also for IPv4, as
//! Linux does since 2018); an exact duplicate of a fragment already held
//! is dropped alone (RFC 5722 erratum 3089).
//!
//! Every fragment given to [`Table::add`] ends in exactly one place: a
//! [`Reason`] counted in [`Table::counts`], or a [`Datagram`] whose
//! `frags` says how many fragments it took.

use std::collections::hash_map::Entry as MapEntry;
use std::collections::{HashMap, VecDeque};

/// Bounds of a table (see the module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub datagrams: usize,
    pub per_source: usize,
    pub max_size: usize,
    pub max_frags: usize,
    pub timeout_ns: u64,
}

impl Default for Limits {
    /// 1,024 datagrams, 64 per source, 16 KiB, 64 fragments, 2 s.
    fn default() -> Self {
        Limits { datagrams: 1024, per_source: 64, max_size: 16 * 1024, max_frags: 64, timeout_ns: 2_000_000_000 }
    }
}

/// Why fragments were dropped; each counts fragments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Malformed: empty, or not the last and not a multiple of 8 bytes.
    Bad = 0,
    /// An exact copy of a fragment held (dropped alone).
    Duplicate,
    /// Overlapped another fragment: the datagram's fragments, and those
    /// that come after it until its timeout.
    Overlap,
    /// Ends disagree: two last fragments, or data past the last one.
    Inconsistent,
    /// Past `max_size` (or 65535 with the header).
    TooBig,
    /// Past `max_frags`.
    TooManyFrags,
    /// The source already has `per_source` datagrams in reassembly.
    SourceLimit,
    /// Held by a datagram evicted to make room for a new one.
    Evicted,
    /// Held by a datagram not complete within `timeout_ns`.
    Timeout,
}

/// The number of [`Reason`]s.
pub const REASONS: usize = 9;

/// Identifies a datagram: source, destination, protocol (IPv4) or 0
/// (IPv6), identification. IPv4 addresses are IPv4-mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub id: u32,
    pub proto: u8,
}

/// A fragment, parsed by [`parse_v4`] or [`parse_v6`].
#[derive(Clone, Copy, Debug)]
pub struct Frag<'a> {
    pub key: Key,
    /// The fragmented part's protocol (IPv6: the fragment header's next
    /// header; IPv4: the header's).
    pub proto: u8,
    /// Byte offset in the datagram's payload.
    pub offset: usize,
    pub more: bool,
    /// The header the datagram keeps (used from the first fragment):
    /// IPv4's header with its options; IPv6's header and the extension
    /// headers before the fragment header.
    pub header: &'a [u8],
    /// IPv6: where in `header` the next header that named the fragment
    /// header is (rewritten to `proto`).
    pub nh_at: Option<usize>,
    pub payload: &'a [u8],
}

/// An IPv4 header's fragment fields: a fragment when MF is set or the
/// offset is not zero.
pub fn is_fragment_v4(l3: &[u8]) -> bool {
    l3.get(6..8).and_then(|f| f.first_chunk::<2>()).is_some_and(|f| u16::from_be_bytes(*f) & 0x3fff != 0)
}

/// The fragment in the IPv4 packet `l3` (header validated or not: `None`
/// when the header or its total length do not fit).
pub fn parse_v4(l3: &[u8]) -> Option<Frag<'_>> {
    let h = l3.first_chunk::<20>()?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if h[0] >> 4 != 4 || ihl < 20 || total < ihl || total > l3.len() {
        return None;
    }
    let fl = u16::from_be_bytes([h[6], h[7]]);
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src[10..12].fill(0xff);
    dst[10..12].fill(0xff);
    src[12..].copy_from_slice(&h[12..16]);
    dst[12..].copy_from_slice(&h[16..20]);
    let id = u32::from(u16::from_be_bytes([h[4], h[5]]));
    Some(Frag {
        key: Key { src, dst, id, proto: h[9] },
        proto: h[9],
        offset: usize::from(fl & 0x1fff) * 8,
        more: fl & 0x2000 != 0,
        header: l3.get(..ihl)?,
        nh_at: None,
        payload: l3.get(ihl..total)?,
    })
}

/// The fragment in the IPv6 packet `l3`: the extension headers before a
/// fragment header (hop-by-hop 0, routing 43, destination options 60, at
/// most 8) are the unfragmentable part. `None` without a fragment header
/// there, or when a header or the payload length do not fit.
pub fn parse_v6(l3: &[u8]) -> Option<Frag<'_>> {
    let h = l3.first_chunk::<40>()?;
    let end = 40 + usize::from(u16::from_be_bytes([h[4], h[5]]));
    let l3 = l3.get(..end)?;
    let (mut nh, mut nh_at, mut at) = (h[6], 6, 40);
    for _ in 0..8 {
        match nh {
            44 => {
                let f = l3.get(at..)?.first_chunk::<8>()?;
                let fo = u16::from_be_bytes([f[2], f[3]]);
                let src: [u8; 16] = h.get(8..24)?.try_into().ok()?;
                let dst: [u8; 16] = h.get(24..40)?.try_into().ok()?;
                let id = u32::from_be_bytes([f[4], f[5], f[6], f[7]]);
                return Some(Frag {
                    key: Key { src, dst, id, proto: 0 },
                    proto: f[0],
                    offset: usize::from(fo & 0xfff8),
                    more: fo & 1 != 0,
                    header: l3.get(..at)?,
                    nh_at: Some(nh_at),
                    payload: l3.get(at + 8..)?,
                });
            }
            0 | 43 | 60 => {
                let len = (usize::from(*l3.get(at + 1)?) + 1) * 8;
                nh = *l3.get(at)?;
                nh_at = at;
                at += len;
            }
            _ => return None,
        }
    }
    None
}

/// A reassembled datagram: `header` (its length, fragment fields and
/// checksum, or payload length and next header, already rewritten) then
/// `payload`; `frags` fragments made it. Hand it back with
/// [`Table::recycle`] to reuse its buffers.
#[derive(Debug, Default)]
pub struct Datagram {
    pub header: Vec<u8>,
    pub payload: Vec<u8>,
    pub frags: u32,
}

impl Datagram {
    /// The whole packet, header then payload (tests and the fuzz target;
    /// the nodes copy the two parts straight into a packet).
    pub fn bytes(&self) -> Vec<u8> {
        [&self.header[..], &self.payload[..]].concat()
    }
}

struct Entry {
    generation: u64,
    header: Vec<u8>,
    payload: Vec<u8>,
    /// The byte ranges held, in arrival order (at most `max_frags`).
    ranges: Vec<(u32, u32)>,
    /// Bytes held (ranges never overlap).
    covered: u32,
    /// The payload's end, once the last fragment came.
    end: Option<u32>,
    /// Dropped for an overlap: later fragments are dropped too.
    dead: bool,
}

impl Entry {
    fn frags(&self) -> u32 {
        self.ranges.len() as u32
    }
}

/// One worker's reassembly table for one family (see the module).
pub struct Table {
    limits: Limits,
    v6: bool,
    map: HashMap<Key, Entry>,
    /// Datagrams by age (creation): key, generation, deadline. Entries
    /// whose datagram is gone are skipped, and compacted away when this
    /// grows past twice the table.
    order: VecDeque<(Key, u64, u64)>,
    per_src: HashMap<[u8; 8], u32>,
    next_gen: u64,
    counts: [u64; REASONS],
    /// Buffers of finished datagrams, for the next ones.
    spare: Vec<Vec<u8>>,
}

impl Table {
    pub fn new(limits: Limits, v6: bool) -> Table {
        Table {
            limits,
            v6,
            map: HashMap::new(),
            order: VecDeque::new(),
            per_src: HashMap::new(),
            next_gen: 0,
            counts: [0; REASONS],
            spare: Vec::new(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Takes new bounds (a reload), keeping the datagrams held: a smaller
    /// table evicts its oldest datagrams down to `datagrams` at once; the
    /// other bounds apply to the fragments that come next (a source over
    /// a smaller share starts no new datagram until it is back under it;
    /// a datagram keeps the deadline it started with).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
        while self.map.len() > limits.datagrams {
            let before = self.map.len();
            self.evict_oldest();
            if self.map.len() == before {
                break;
            }
        }
    }

    /// Datagrams in reassembly (dead ones included until their timeout).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Fragments dropped since the last call, by [`Reason`].
    pub fn take_counts(&mut self) -> [u64; REASONS] {
        std::mem::take(&mut self.counts)
    }

    /// The source share's key: an IPv4 address, or an IPv6 /64.
    fn source(&self, key: &Key) -> [u8; 8] {
        let mut s = [0u8; 8];
        if self.v6 {
            s.copy_from_slice(&key.src[..8]);
        } else {
            s[..4].copy_from_slice(&key.src[12..]);
        }
        s
    }

    fn count(&mut self, r: Reason, n: u32) {
        if let Some(c) = self.counts.get_mut(r as usize) {
            *c += u64::from(n);
        }
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Gives a datagram's buffers back for reuse.
    pub fn recycle(&mut self, d: Datagram) {
        for mut b in [d.header, d.payload] {
            if self.spare.len() < 64 {
                b.clear();
                self.spare.push(b);
            }
        }
    }

    /// Removes `key`'s datagram, counting its held fragments as `r`
    /// (none if it was dead: they were counted then).
    fn remove(&mut self, key: &Key, r: Reason) {
        let Some(e) = self.unlink(key) else { return };
        if !e.dead {
            self.count(r, e.frags());
        }
        self.recycle(Datagram { header: e.header, payload: e.payload, frags: 0 });
    }

    /// Takes `key`'s entry out of the table and its source's share.
    fn unlink(&mut self, key: &Key) -> Option<Entry> {
        let e = self.map.remove(key)?;
        let src = self.source(key);
        if let MapEntry::Occupied(mut o) = self.per_src.entry(src) {
            *o.get_mut() -= 1;
            if *o.get() == 0 {
                o.remove();
            }
        }
        Some(e)
    }

    /// Drops the datagrams whose timeout passed at `now_ns`.
    pub fn expire(&mut self, now_ns: u64) {
        while let Some(&(key, g, deadline)) = self.order.front() {
            if deadline > now_ns {
                break;
            }
            self.order.pop_front();
            if self.map.get(&key).is_some_and(|e| e.generation == g) {
                self.remove(&key, Reason::Timeout);
            }
        }
    }

    /// The deadline of the oldest datagram held, if any (a stale entry of
    /// `order` may answer early: that only wakes the caller sooner).
    pub fn next_deadline(&self) -> Option<u64> {
        if self.map.is_empty() { None } else { self.order.front().map(|o| o.2) }
    }

    /// Evicts the oldest datagram held.
    fn evict_oldest(&mut self) {
        while let Some((key, g, _)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.generation == g) {
                self.remove(&key, Reason::Evicted);
                return;
            }
        }
    }

    /// Takes in one fragment at `now_ns`: the datagram when it completes
    /// it, else `None` (held, or dropped and counted).
    pub fn add(&mut self, f: &Frag<'_>, now_ns: u64) -> Option<Datagram> {
        self.expire(now_ns);
        let len = f.payload.len();
        if len == 0 || (f.more && !len.is_multiple_of(8)) {
            self.count(Reason::Bad, 1);
            return None;
        }
        let end = f.offset + len;
        let key = f.key;
        if end > self.limits.max_size.min(65535) {
            self.count(Reason::TooBig, 1);
            self.remove(&key, Reason::TooBig);
            return None;
        }
        if !self.map.contains_key(&key) && !self.create(key, now_ns) {
            return None;
        }
        let max_frags = self.limits.max_frags;
        let e = self.map.get_mut(&key)?;
        let (start, end) = (f.offset as u32, end as u32);
        let verdict = if e.dead {
            Some(Reason::Overlap)
        } else if e.ranges.contains(&(start, end)) {
            Some(Reason::Duplicate)
        } else if e.ranges.len() >= max_frags {
            Some(Reason::TooManyFrags)
        } else if e.ranges.iter().any(|&(s, t)| start < t && s < end) {
            Some(Reason::Overlap)
        } else if (!f.more && (e.end.is_some_and(|x| x != end) || e.ranges.iter().any(|r| r.1 > end)))
            || (f.more && e.end.is_some_and(|x| end >= x))
        {
            Some(Reason::Inconsistent)
        } else {
            None
        };
        match verdict {
            Some(r @ (Reason::Duplicate | Reason::Bad)) => {
                self.count(r, 1);
                return None;
            }
            Some(Reason::Overlap) if !e.dead => {
                // RFC 5722: the datagram goes, and what comes of it later.
                let n = e.frags() + 1;
                e.dead = true;
                e.ranges.clear();
                let (h, p) = (std::mem::take(&mut e.header), std::mem::take(&mut e.payload));
                self.count(Reason::Overlap, n);
                self.recycle(Datagram { header: h, payload: p, frags: 0 });
                return None;
            }
            Some(r @ Reason::Overlap) => {
                self.count(r, 1);
                return None;
            }
            Some(r) => {
                self.count(r, 1);
                self.remove(&key, r);
                return None;
            }
            None => {}
        }
        if !f.more {
            e.end = Some(end);
        }
        if e.payload.len() < end as usize {
            e.payload.resize(end as usize, 0);
        }
        if let Some(dst) = e.payload.get_mut(start as usize..end as usize) {
            dst.copy_from_slice(f.payload);
        }
        if start == 0 {
            e.header.clear();
            e.header.extend_from_slice(f.header);
            if let Some(b) = f.nh_at.and_then(|at| e.header.get_mut(at)) {
                *b = f.proto;
            }
        }
        e.ranges.push((start, end));
        e.covered += end - start;
        if e.end != Some(e.covered) {
            return None;
        }
        // Complete: the ranges do not overlap and add up to the end.
        let frags = e.frags();
        let (mut header, payload) = (std::mem::take(&mut e.header), std::mem::take(&mut e.payload));
        let total = header.len() + payload.len();
        self.unlink(&key);
        if !self.finish_header(&mut header, total) {
            self.count(Reason::TooBig, frags);
            self.recycle(Datagram { header, payload, frags: 0 });
            return None;
        }
        Some(Datagram { header, payload, frags })
    }

    /// Starts `key`'s datagram, making room if the table is full; false
    /// (the fragment counted) when its source is at its share.
    fn create(&mut self, key: Key, now_ns: u64) -> bool {
        let src = self.source(&key);
        let n = self.per_src.get(&src).copied().unwrap_or(0);
        if n as usize >= self.limits.per_source {
            self.count(Reason::SourceLimit, 1);
            return false;
        }
        if self.map.len() >= self.limits.datagrams {
            self.evict_oldest();
            if self.map.len() >= self.limits.datagrams {
                // A zero-size table.
                self.count(Reason::Evicted, 1);
                return false;
            }
        }
        if self.order.len() > 2 * self.limits.datagrams.max(8) {
            let map = &self.map;
            self.order.retain(|(k, g, _)| map.get(k).is_some_and(|e| e.generation == *g));
        }
        self.next_gen += 1;
        let (header, payload) = (self.buffer(), self.buffer());
        let e = Entry {
            generation: self.next_gen,
            header,
            payload,
            ranges: Vec::new(),
            covered: 0,
            end: None,
            dead: false,
        };
        self.map.insert(key, e);
        self.order.push_back((key, self.next_gen, now_ns.saturating_add(self.limits.timeout_ns)));
        *self.per_src.entry(src).or_insert(0) += 1;
        true
    }

    /// Rewrites the first fragment's header for the whole datagram of
    /// `total` bytes: false when that is over 65535 (IPv6: payload).
    fn finish_header(&self, h: &mut [u8], total: usize) -> bool {
        if self.v6 {
            let Some(Ok(plen)) = total.checked_sub(40).map(u16::try_from) else { return false };
            if let Some(b) = h.get_mut(4..6) {
                b.copy_from_slice(&plen.to_be_bytes());
            }
            return true;
        }
        let Ok(total) = u16::try_from(total) else { return false };
        let Some(b) = h.first_chunk_mut::<20>() else { return false };
        b[2..4].copy_from_slice(&total.to_be_bytes());
        // Keep DF; MF and the offset go.
        b[6] &= 0x40;
        b[7] = 0;
        b[10] = 0;
        b[11] = 0;
        let c = !checksum(h);
        if let Some(b) = h.get_mut(10..12) {
            b.copy_from_slice(&c.to_be_bytes());
        }
        true
    }
}

/// RFC 1071 sum of `data`, folded (not complemented).
fn checksum(data: &[u8]) -> u16 {
    let mut s: u32 = 0;
    let (words, rest) = data.as_chunks::<2>();
    for w in words {
        s += u32::from(u16::from_be_bytes(*w));
    }
    if let [b] = rest {
        s += u32::from(*b) << 8;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
