//! Peers' chains already checked, as strongSwan's cert_cache keeps them
//! (there: issuer signatures; here the whole verdict of [`super::chain`]
//! on the exact certificates a peer sent). Many tunnels from one
//! certificate, a peer that reconnects or re-authenticates: one chain check
//! (parse, issuer signatures, extensions, name constraints), then only the
//! AUTH signature and the identity per setup.
//!
//! Keyed by a SHA-256 over every certificate as received (count, then each
//! length-prefixed, in order), so a hit is the same input the check passed
//! on; the CAs are fixed for the [`super::Credentials`] that holds the
//! cache (a reload with other CAs makes another). Only successes are kept,
//! with the [`Window`] their path is valid in: outside it the entry is not
//! used and the full check runs again, which names the certificate that
//! is not valid now. Bounded: when full it is emptied (a few misses, no
//! policy to get wrong; the entries dropped count as evictions). An entry
//! is about 400 bytes (the key, the names). Its size is
//! `[ike_service] cert_cache_entries` (0: off); hits, misses (full checks)
//! and evictions are counted for /metrics and `tern ike peer show`.

use super::algorithm::PublicKey;
use super::chain::{Names, Window};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A chain that passed: what the AUTH and identity checks need of it.
#[derive(Debug)]
pub struct Checked {
    /// The end entity's public key.
    pub key: PublicKey,
    /// What the end entity names.
    pub names: Names,
    /// Its subject as text ("O=tern, CN=moon.tern.test"), for messages.
    pub name: String,
    /// When the path is valid.
    pub window: Window,
}

pub struct ChainCache {
    seen: Mutex<HashMap<[u8; 32], Arc<Checked>>>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

/// What a [`ChainCache`] holds and did (for metrics and the CLI).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChainCacheStats {
    pub entries: u64,
    pub capacity: u64,
    /// Chains found checked and valid now.
    pub hits: u64,
    /// Chains checked in full (not kept, expired, or the cache off).
    pub misses: u64,
    /// Entries dropped to make room.
    pub evictions: u64,
}

impl ChainCacheStats {
    pub fn add(&mut self, o: &ChainCacheStats) {
        self.entries += o.entries;
        self.capacity += o.capacity;
        self.hits += o.hits;
        self.misses += o.misses;
        self.evictions += o.evictions;
    }
}

impl ChainCache {
    pub fn new(capacity: usize) -> ChainCache {
        ChainCache {
            seen: Mutex::new(HashMap::new()),
            capacity,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> ChainCacheStats {
        ChainCacheStats {
            entries: self.len() as u64,
            capacity: self.capacity as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }

    /// The key of the certificates a peer sent.
    pub fn key(certs: &[Vec<u8>]) -> [u8; 32] {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(&(certs.len() as u64).to_be_bytes());
        for der in certs {
            ctx.update(&(der.len() as u64).to_be_bytes());
            ctx.update(der);
        }
        let mut out = [0; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        out
    }

    /// The chain under `key` if it was checked and its path is valid at
    /// `now`. A poisoned lock (a panic elsewhere while holding it) only
    /// costs hits.
    pub fn get(&self, key: &[u8; 32], now: i64) -> Option<Arc<Checked>> {
        let hit = self.lookup(key, now);
        let counter = if hit.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        hit
    }

    fn lookup(&self, key: &[u8; 32], now: i64) -> Option<Arc<Checked>> {
        if self.capacity == 0 {
            return None;
        }
        let c = self.seen.lock().ok()?.get(key).cloned()?;
        c.window.contains(now).then_some(c)
    }

    pub fn insert(&self, key: [u8; 32], checked: Arc<Checked>) {
        if self.capacity == 0 {
            return;
        }
        if let Ok(mut s) = self.seen.lock() {
            if s.len() >= self.capacity && !s.contains_key(&key) {
                self.evictions.fetch_add(s.len() as u64, Ordering::Relaxed);
                s.clear();
            }
            s.insert(key, checked);
        }
    }

    /// Forgets every chain (the trust they were checked against is gone).
    pub fn flush(&self) {
        if let Ok(mut s) = self.seen.lock() {
            s.clear();
            s.shrink_to_fit();
        }
    }

    pub fn len(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }
}
