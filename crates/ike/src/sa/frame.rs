//! Encrypted messages: sealing (with RFC 7383 fragmentation when the peer
//! supports it and the datagram would exceed `Settings::fragment_size`),
//! opening (with bounded reassembly), sending requests and responses.

use super::{CachedResponse, IkeSa, Pending, Reassembly, Req};
use crate::crypto::{CryptoError, SkCipher};
use crate::ike::Ike;
use crate::output::Output;
use crate::wire::{self, FLAG_INITIATOR, FLAG_RESPONSE, HEADER_LEN, Header, Message, Payload, payload_kind};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// At most this many fragments, this many bytes, per reassembled message.
const MAX_FRAGMENTS: u16 = 64;
const MAX_REASSEMBLY: usize = 64 * 1024;
/// Fragments of one message must all arrive within this.
const REASSEMBLY_TIMEOUT: Duration = Duration::from_secs(10);

/// What opening a message gave.
pub enum Opened {
    Payloads(Vec<Payload>),
    /// A fragment was kept; the message is not complete.
    Partial,
    Failed(&'static str),
}

fn udp_overhead(remote: SocketAddr, non_esp_marker: bool) -> usize {
    (if remote.is_ipv4() { 20 } else { 40 }) + 8 + if non_esp_marker { 4 } else { 0 }
}

impl Ike {
    fn ciphers(sa: &IkeSa) -> Option<(&SkCipher, &SkCipher)> {
        let k = sa.keys.as_ref()?;
        Some(if sa.initiator { (&k.initiator, &k.responder) } else { (&k.responder, &k.initiator) })
    }

    /// The datagrams of one encrypted message (several when fragmented).
    pub(crate) fn seal(
        &self,
        sa: &IkeSa,
        exchange: u8,
        response: bool,
        mid: u32,
        inner: &[Payload],
    ) -> Result<Vec<Vec<u8>>, CryptoError> {
        let (ours, _) = Self::ciphers(sa).ok_or(CryptoError::Malformed("no keys"))?;
        let mut header = Header {
            spi_i: sa.spi_i,
            spi_r: sa.spi_r,
            next_payload: payload_kind::SK,
            version: 0x20,
            exchange,
            flags: if sa.initiator { FLAG_INITIATOR } else { 0 } | if response { FLAG_RESPONSE } else { 0 },
            message_id: mid,
            length: 0,
        };
        let (first, plain) = wire::encode_payloads(inner);
        let body_len = plain.len() + ours.overhead(plain.len());
        let overhead = udp_overhead(sa.remote, sa.remote.port() != 500);
        let whole = overhead + HEADER_LEN + 4 + body_len;
        if !(sa.frag && whole > self.settings.fragment_size && exchange != wire::IKE_SA_INIT) {
            let mut out = wire::sk_aad(&header, first, body_len);
            let aad = out.clone();
            // The datagram's exact size: grown by doubling it would hold
            // about twice its length, and a response is cached (64 s with
            // the default retransmissions) with every tunnel set up.
            out.reserve_exact(body_len);
            ours.seal(&aad, &plain, &mut out)?;
            return Ok(vec![out]);
        }
        // RFC 7383 2.5: each fragment its own SKF payload, encrypted alone.
        header.next_payload = payload_kind::SKF;
        let avail = self.settings.fragment_size.saturating_sub(overhead + HEADER_LEN + 8);
        let mut chunk = avail.saturating_sub(ours.overhead(avail));
        while chunk > 0 && chunk + ours.overhead(chunk) > avail {
            chunk -= 1;
        }
        let chunk = chunk.max(64);
        let total = plain.len().div_ceil(chunk);
        let total16 = u16::try_from(total).map_err(|_| CryptoError::Malformed("too many fragments"))?;
        let mut out = Vec::with_capacity(total);
        for (i, part) in plain.chunks(chunk).enumerate() {
            let number = u16::try_from(i + 1).unwrap_or(u16::MAX);
            let body_len = part.len() + ours.overhead(part.len());
            let mut d = wire::skf_aad(&header, if i == 0 { first } else { 0 }, number, total16, body_len);
            let aad = d.clone();
            d.reserve_exact(body_len);
            ours.seal(&aad, part, &mut d)?;
            out.push(d);
        }
        Ok(out)
    }

    /// Decrypts an encrypted message (or keeps a fragment of one).
    pub(crate) fn open(&mut self, sa: &mut IkeSa, now: Instant, data: &[u8], msg: Message) -> Opened {
        let Some((_, theirs)) = Self::ciphers(sa) else { return Opened::Failed("no-keys") };
        let header = msg.header;
        let response = header.flags & FLAG_RESPONSE != 0;
        match msg.payloads.into_iter().last() {
            Some(Payload::Sk { first, body }) => {
                let Some(aad) = data.get(..data.len().saturating_sub(body.len())) else {
                    return Opened::Failed("invalid-syntax");
                };
                let plain = match theirs.open(aad, &body) {
                    Ok(p) => p,
                    Err(_) => return Opened::Failed("decrypt-failed"),
                };
                match wire::decode_payloads(first, &plain) {
                    Ok(p) => Opened::Payloads(p),
                    Err(_) => Opened::Failed("invalid-syntax"),
                }
            }
            Some(Payload::Skf { first, number, total, body }) => {
                if number == 0 || number > total || total > MAX_FRAGMENTS {
                    return Opened::Failed("invalid-fragment");
                }
                let Some(aad) = data.get(..data.len().saturating_sub(body.len())) else {
                    return Opened::Failed("invalid-syntax");
                };
                let plain = match theirs.open(aad, &body) {
                    Ok(p) => p,
                    Err(_) => return Opened::Failed("decrypt-failed"),
                };
                let fresh = match &sa.reassembly {
                    Some(r) => {
                        r.mid != header.message_id || r.response != response || r.parts.len() != usize::from(total)
                    }
                    None => true,
                };
                if fresh {
                    sa.reassembly = Some(Box::new(Reassembly {
                        mid: header.message_id,
                        response,
                        first: 0,
                        parts: vec![None; usize::from(total)],
                        bytes: 0,
                        deadline: now + REASSEMBLY_TIMEOUT,
                    }));
                }
                let Some(r) = sa.reassembly.as_mut() else { return Opened::Failed("invalid-fragment") };
                if number == 1 {
                    r.first = first;
                }
                let Some(slot) = r.parts.get_mut(usize::from(number - 1)) else {
                    return Opened::Failed("invalid-fragment");
                };
                if slot.is_none() {
                    r.bytes += plain.len();
                    *slot = Some(plain);
                }
                if r.bytes > MAX_REASSEMBLY {
                    sa.reassembly = None;
                    return Opened::Failed("fragments-too-large");
                }
                if r.parts.iter().any(|p| p.is_none()) {
                    return Opened::Partial;
                }
                let Some(r) = sa.reassembly.take() else { return Opened::Partial };
                let mut joined = Vec::with_capacity(r.bytes);
                for p in r.parts.into_iter().flatten() {
                    joined.extend_from_slice(&p);
                }
                match wire::decode_payloads(r.first, &joined) {
                    Ok(p) => Opened::Payloads(p),
                    Err(_) => Opened::Failed("invalid-syntax"),
                }
            }
            _ => Opened::Failed("not-encrypted"),
        }
    }

    /// How long a response is kept for retransmitted requests: the
    /// peer's whole retransmission schedule if it is like ours (RFC 7296
    /// 2.1), doubled.
    pub(crate) fn response_cache_time(&self) -> Duration {
        let tries = self.settings.retransmit_tries.min(16);
        self.settings.retransmit_base.saturating_mul((1u32 << (tries + 1)).saturating_mul(2))
    }

    /// Sends an encrypted request and keeps it for retransmission.
    pub(crate) fn send_request(&mut self, sa: &mut IkeSa, now: Instant, exchange: u8, inner: &[Payload], req: Req) {
        let mid = sa.send_mid;
        let datagrams = match self.seal(sa, exchange, false, mid, inner) {
            Ok(d) => d,
            Err(e) => {
                log::warn!("ike: peer {}: cannot encrypt a request: {e}", sa.who());
                self.fail("encrypt-failed");
                return;
            }
        };
        sa.send_mid = sa.send_mid.wrapping_add(1);
        for d in &datagrams {
            self.out.push(Output::Send { local: sa.local, remote: sa.remote, data: d.clone() });
        }
        sa.pending = Some(Box::new(Pending {
            mid,
            exchange,
            datagrams,
            tries: 0,
            deadline: now + self.settings.retransmit_base,
            req,
        }));
    }

    /// Sends an encrypted response to the request `mid` that came from
    /// `remote` to `local`, and caches it.
    pub(crate) fn send_response(
        &mut self,
        sa: &mut IkeSa,
        exchange: u8,
        mid: u32,
        inner: &[Payload],
        local: SocketAddr,
        remote: SocketAddr,
    ) {
        let datagrams = match self.seal(sa, exchange, true, mid, inner) {
            Ok(d) => d,
            Err(e) => {
                log::warn!("ike: peer {}: cannot encrypt a response: {e}", sa.who());
                self.fail("encrypt-failed");
                return;
            }
        };
        for d in &datagrams {
            self.out.push(Output::Send { local, remote, data: d.clone() });
        }
        let until = self.clock.map(|now| now + self.response_cache_time());
        sa.last_resp = Some(Box::new(CachedResponse { mid, datagrams, local, remote, until }));
    }
}
