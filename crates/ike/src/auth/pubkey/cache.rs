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
//! policy to get wrong). An entry is about 400 bytes (the key, the names).

use super::algorithm::PublicKey;
use super::chain::{Names, Window};
use std::collections::HashMap;
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
}

impl ChainCache {
    pub fn new(capacity: usize) -> ChainCache {
        ChainCache { seen: Mutex::new(HashMap::new()), capacity }
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
            if s.len() >= self.capacity {
                s.clear();
            }
            s.insert(key, checked);
        }
    }

    pub fn len(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }
}
