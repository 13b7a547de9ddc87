//! The generic payload chain (RFC 7296 3.2) and every payload's body.

use super::payload_kind as pk;
use super::{CpAttribute, HEADER_LEN, Header, Message, Payload, WireError, WireProposal};
use crate::proposal::Protocol;

/// A cursor over bytes that never panics: every read is checked.
pub(super) struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(data: &'a [u8]) -> Reader<'a> {
        Reader { data }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    pub(super) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.data.len() {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }

    pub(super) fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }

    pub(super) fn u16(&mut self) -> Option<u16> {
        let b: [u8; 2] = self.take(2)?.try_into().ok()?;
        Some(u16::from_be_bytes(b))
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        let b: [u8; 4] = self.take(4)?.try_into().ok()?;
        Some(u32::from_be_bytes(b))
    }

    pub(super) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// A length field: lengths past 65535 cannot be expressed (an IKE message
/// that large would not fit a UDP datagram either); they saturate, which the
/// receiver rejects.
pub(super) fn len16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// Writes `len16(out.len() - start)` into the two bytes at `at`.
fn patch_len(out: &mut [u8], at: usize, start: usize) {
    let len = len16(out.len().saturating_sub(start)).to_be_bytes();
    if let Some(slot) = out.get_mut(at..at + 2) {
        slot.copy_from_slice(&len);
    }
}

impl Message {
    /// Decodes a whole datagram: the major version must be 2, the header's
    /// length must be the datagram's, the payload chain must fill the rest
    /// exactly, and the SK / SKF payload, if any, must be last (its body
    /// runs to the end of the message).
    pub fn decode(data: &[u8]) -> Result<Message, WireError> {
        let header = Header::decode(data)?;
        if header.major_version() != 2 {
            return Err(WireError::Version(header.major_version()));
        }
        if usize::try_from(header.length).ok() != Some(data.len()) {
            return Err(WireError::Length(header.length));
        }
        let payloads = decode_payloads(header.next_payload, data.get(HEADER_LEN..).unwrap_or_default())?;
        Ok(Message { header, payloads })
    }

    /// Encodes the message, filling in the header's next payload and length
    /// and every payload's next payload and length (an SK / SKF payload's
    /// next payload is its `first`: put it last).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        self.header.encode(&mut out);
        let first = encode_chain(&self.payloads, &mut out);
        let length = u32::try_from(out.len()).unwrap_or(u32::MAX).to_be_bytes();
        if let Some(slot) = out.get_mut(16) {
            *slot = first;
        }
        if let Some(slot) = out.get_mut(24..HEADER_LEN) {
            slot.copy_from_slice(&length);
        }
        out
    }
}

/// The type number of a payload.
pub fn payload_type(p: &Payload) -> u8 {
    match p {
        Payload::Sa(_) => pk::SA,
        Payload::Ke { .. } => pk::KE,
        Payload::IdI(_) => pk::IDI,
        Payload::IdR(_) => pk::IDR,
        Payload::Cert { .. } => pk::CERT,
        Payload::CertReq { .. } => pk::CERTREQ,
        Payload::Auth { .. } => pk::AUTH,
        Payload::Nonce(_) => pk::NONCE,
        Payload::Notify { .. } => pk::NOTIFY,
        Payload::Delete { .. } => pk::DELETE,
        Payload::VendorId(_) => pk::VENDOR_ID,
        Payload::TsI(_) => pk::TSI,
        Payload::TsR(_) => pk::TSR,
        Payload::Sk { .. } => pk::SK,
        Payload::Cp { .. } => pk::CP,
        Payload::Skf { .. } => pk::SKF,
        Payload::Unknown { kind, .. } => *kind,
    }
}

/// A payload chain without header (the plaintext inside SK): the first
/// payload's type (0 if none) and the bytes.
pub fn encode_payloads(payloads: &[Payload]) -> (u8, Vec<u8>) {
    let mut out = Vec::with_capacity(512);
    let first = encode_chain(payloads, &mut out);
    (first, out)
}

/// Appends the chain to `out`; returns the first payload's type.
fn encode_chain(payloads: &[Payload], out: &mut Vec<u8>) -> u8 {
    let mut iter = payloads.iter().peekable();
    while let Some(p) = iter.next() {
        let next = match p {
            Payload::Sk { first, .. } | Payload::Skf { first, .. } => *first,
            _ => iter.peek().map_or(pk::NONE, |n| payload_type(n)),
        };
        let start = out.len();
        out.extend_from_slice(&[next, 0, 0, 0]);
        encode_body(p, out);
        patch_len(out, start + 2, start);
    }
    payloads.first().map_or(pk::NONE, payload_type)
}

/// Decodes a payload chain whose first payload has type `first`: it must
/// end (next payload 0, or an SK / SKF payload) exactly at the end of
/// `data`.
pub fn decode_payloads(first: u8, data: &[u8]) -> Result<Vec<Payload>, WireError> {
    let mut out = Vec::new();
    let mut next = first;
    let mut r = Reader::new(data);
    while next != pk::NONE {
        let kind = next;
        let (Some(n), Some(flags), Some(len)) = (r.u8(), r.u8(), r.u16()) else {
            return Err(WireError::Truncated);
        };
        next = n;
        let body_len = usize::from(len).checked_sub(4).ok_or(WireError::Payload(kind, "length below 4"))?;
        let body = r.take(body_len).ok_or(WireError::Payload(kind, "length runs past the message"))?;
        if kind == pk::SK || kind == pk::SKF {
            if !r.is_empty() {
                return Err(WireError::Payload(kind, "encrypted payload not last"));
            }
            out.push(decode_encrypted(kind, next, body)?);
            return Ok(out);
        }
        out.push(decode_body(kind, flags & 0x80 != 0, body)?);
    }
    if !r.is_empty() {
        return Err(WireError::Payload(pk::NONE, "bytes after the last payload"));
    }
    Ok(out)
}

/// The bytes before an SK payload's body: the header (next payload SK,
/// length 28 + 4 + `body_len`, whatever `header` says of both) and the SK
/// generic payload header. With the sealed body appended, this is the
/// datagram.
pub fn sk_aad(header: &Header, first_inner: u8, body_len: usize) -> Vec<u8> {
    encrypted_aad(header, pk::SK, first_inner, &[], body_len)
}

/// As [`sk_aad`] for an encrypted fragment (RFC 7383 2.5): the header
/// (next payload SKF), the SKF generic header, the fragment number and the
/// total.
pub fn skf_aad(header: &Header, first_inner: u8, number: u16, total: u16, body_len: usize) -> Vec<u8> {
    let mut extra = [0u8; 4];
    let (a, b) = extra.split_at_mut(2);
    a.copy_from_slice(&number.to_be_bytes());
    b.copy_from_slice(&total.to_be_bytes());
    encrypted_aad(header, pk::SKF, first_inner, &extra, body_len)
}

fn encrypted_aad(header: &Header, kind: u8, first_inner: u8, extra: &[u8], body_len: usize) -> Vec<u8> {
    let payload_len = 4 + extra.len() + body_len;
    let header =
        Header { next_payload: kind, length: u32::try_from(HEADER_LEN + payload_len).unwrap_or(u32::MAX), ..*header };
    let mut out = Vec::with_capacity(HEADER_LEN + 4 + extra.len());
    header.encode(&mut out);
    out.push(first_inner);
    out.push(0);
    out.extend_from_slice(&len16(payload_len).to_be_bytes());
    out.extend_from_slice(extra);
    out
}

fn decode_encrypted(kind: u8, first: u8, body: &[u8]) -> Result<Payload, WireError> {
    if kind == pk::SK {
        return Ok(Payload::Sk { first, body: body.to_vec() });
    }
    let mut r = Reader::new(body);
    let (Some(number), Some(total)) = (r.u16(), r.u16()) else {
        return Err(WireError::Payload(kind, "fragment header truncated"));
    };
    if number == 0 || number > total {
        return Err(WireError::Payload(kind, "fragment number outside 1..=total"));
    }
    Ok(Payload::Skf { first, number, total, body: r.rest().to_vec() })
}

fn decode_body(kind: u8, critical: bool, body: &[u8]) -> Result<Payload, WireError> {
    let short = WireError::Payload(kind, "truncated");
    let mut r = Reader::new(body);
    Ok(match kind {
        pk::SA => Payload::Sa(decode_sa(body)?),
        pk::KE => {
            let (Some(group), Some(_)) = (r.u16(), r.u16()) else { return Err(short) };
            Payload::Ke { group, data: r.rest().to_vec() }
        }
        pk::IDI => Payload::IdI(super::id::decode_id(kind, body)?),
        pk::IDR => Payload::IdR(super::id::decode_id(kind, body)?),
        pk::CERT | pk::CERTREQ => {
            let Some(encoding) = r.u8() else { return Err(short) };
            let data = r.rest().to_vec();
            if kind == pk::CERT { Payload::Cert { encoding, data } } else { Payload::CertReq { encoding, data } }
        }
        pk::AUTH => {
            let (Some(method), Some(_)) = (r.u8(), r.take(3)) else { return Err(short) };
            Payload::Auth { method, data: r.rest().to_vec() }
        }
        pk::NONCE => {
            if !(16..=256).contains(&body.len()) {
                return Err(WireError::Payload(kind, "nonce length outside 16..=256"));
            }
            Payload::Nonce(body.to_vec())
        }
        pk::NOTIFY => {
            let (Some(protocol), Some(spi_size), Some(kind16)) = (r.u8(), r.u8(), r.u16()) else { return Err(short) };
            let Some(spi) = r.take(usize::from(spi_size)) else { return Err(short) };
            Payload::Notify { protocol, spi: spi.to_vec(), kind: kind16, data: r.rest().to_vec() }
        }
        pk::DELETE => {
            let (Some(protocol), Some(spi_size), Some(count)) = (r.u8(), r.u8(), r.u16()) else { return Err(short) };
            let mut spis = Vec::new();
            match (spi_size, count) {
                (0, 0) => {}
                (4, n) => {
                    for _ in 0..n {
                        spis.push(r.u32().ok_or(short)?);
                    }
                }
                _ => return Err(WireError::Payload(kind, "SPI size neither 0 nor 4")),
            }
            if !r.is_empty() {
                return Err(WireError::Payload(kind, "bytes after the SPIs"));
            }
            Payload::Delete { protocol, spis }
        }
        pk::VENDOR_ID => Payload::VendorId(body.to_vec()),
        pk::TSI => Payload::TsI(super::ts::decode_ts(kind, body)?),
        pk::TSR => Payload::TsR(super::ts::decode_ts(kind, body)?),
        pk::CP => {
            let (Some(cfg), Some(_)) = (r.u8(), r.take(3)) else { return Err(short) };
            let mut attributes = Vec::new();
            while !r.is_empty() {
                let (Some(t), Some(len)) = (r.u16(), r.u16()) else { return Err(short) };
                let value = r.take(usize::from(len)).ok_or(short)?;
                attributes.push(CpAttribute { kind: t & 0x7fff, value: value.to_vec() });
            }
            Payload::Cp { kind: cfg, attributes }
        }
        _ if critical => return Err(WireError::UnsupportedCritical(kind)),
        _ => Payload::Unknown { kind, data: body.to_vec() },
    })
}

/// Transform attribute Key Length (RFC 7296 3.3.5), TV format.
const ATTR_KEY_LENGTH: u16 = 14;

/// The SA payload's proposals. Proposals of protocols tern does not speak
/// (AH) are left out, as are transforms with attributes other than the key
/// length (RFC 7296 3.3.6: such a transform is not acceptable), so selection
/// never picks what it cannot honour.
fn decode_sa(body: &[u8]) -> Result<Vec<WireProposal>, WireError> {
    let err = |what| WireError::Payload(pk::SA, what);
    let mut r = Reader::new(body);
    let mut out = Vec::new();
    while !r.is_empty() {
        let (Some(_last), Some(_), Some(len)) = (r.u8(), r.u8(), r.u16()) else {
            return Err(err("proposal truncated"));
        };
        let p = usize::from(len).checked_sub(4).and_then(|n| r.take(n)).ok_or(err("proposal length wrong"))?;
        let mut p = Reader::new(p);
        let (Some(number), Some(proto), Some(spi_size), Some(count)) = (p.u8(), p.u8(), p.u8(), p.u8()) else {
            return Err(err("proposal truncated"));
        };
        let spi = p.take(usize::from(spi_size)).ok_or(err("proposal SPI truncated"))?.to_vec();
        let mut transforms = Vec::new();
        let mut seen = 0usize;
        while !p.is_empty() {
            let (Some(_last), Some(_), Some(tlen)) = (p.u8(), p.u8(), p.u16()) else {
                return Err(err("transform truncated"));
            };
            let t = usize::from(tlen).checked_sub(4).and_then(|n| p.take(n)).ok_or(err("transform length wrong"))?;
            let mut t = Reader::new(t);
            let (Some(ttype), Some(_), Some(id)) = (t.u8(), t.u8(), t.u16()) else {
                return Err(err("transform truncated"));
            };
            let mut key_len = None;
            let mut acceptable = true;
            while !t.is_empty() {
                let Some(at) = t.u16() else { return Err(err("attribute truncated")) };
                if at & 0x8000 != 0 {
                    let Some(v) = t.u16() else { return Err(err("attribute truncated")) };
                    if at & 0x7fff == ATTR_KEY_LENGTH {
                        key_len = Some(v);
                    } else {
                        acceptable = false;
                    }
                } else {
                    let Some(alen) = t.u16() else { return Err(err("attribute truncated")) };
                    t.take(usize::from(alen)).ok_or(err("attribute truncated"))?;
                    acceptable = false;
                }
            }
            seen += 1;
            if acceptable {
                transforms.push((ttype, id, key_len));
            }
        }
        if seen != usize::from(count) {
            return Err(err("transform count does not match the proposal"));
        }
        let protocol = match proto {
            1 => Protocol::Ike,
            3 => Protocol::Esp,
            _ => continue,
        };
        out.push(WireProposal { number, protocol, spi, transforms });
    }
    Ok(out)
}

fn encode_sa(proposals: &[WireProposal], out: &mut Vec<u8>) {
    for (i, p) in proposals.iter().enumerate() {
        let start = out.len();
        let last = if i + 1 == proposals.len() { 0 } else { 2 };
        let proto = match p.protocol {
            Protocol::Ike => 1,
            Protocol::Esp => 3,
        };
        let spi = p.spi.get(..p.spi.len().min(255)).unwrap_or_default();
        let transforms = p.transforms.get(..p.transforms.len().min(255)).unwrap_or_default();
        out.extend_from_slice(&[last, 0, 0, 0, p.number, proto, spi.len() as u8, transforms.len() as u8]);
        out.extend_from_slice(spi);
        for (j, &(ttype, id, key_len)) in transforms.iter().enumerate() {
            let tstart = out.len();
            let tlast = if j + 1 == transforms.len() { 0 } else { 3 };
            out.extend_from_slice(&[tlast, 0, 0, 0, ttype, 0]);
            out.extend_from_slice(&id.to_be_bytes());
            if let Some(k) = key_len {
                out.extend_from_slice(&(0x8000 | ATTR_KEY_LENGTH).to_be_bytes());
                out.extend_from_slice(&k.to_be_bytes());
            }
            patch_len(out, tstart + 2, tstart);
        }
        patch_len(out, start + 2, start);
    }
}

fn encode_body(p: &Payload, out: &mut Vec<u8>) {
    match p {
        Payload::Sa(proposals) => encode_sa(proposals, out),
        Payload::Ke { group, data } => {
            out.extend_from_slice(&group.to_be_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(data);
        }
        Payload::IdI(id) | Payload::IdR(id) => super::id::encode_id(id, out),
        Payload::Cert { encoding, data } | Payload::CertReq { encoding, data } => {
            out.push(*encoding);
            out.extend_from_slice(data);
        }
        Payload::Auth { method, data } => {
            out.extend_from_slice(&[*method, 0, 0, 0]);
            out.extend_from_slice(data);
        }
        Payload::Nonce(data) | Payload::VendorId(data) | Payload::Unknown { data, .. } => out.extend_from_slice(data),
        Payload::Notify { protocol, spi, kind, data } => {
            let spi = spi.get(..spi.len().min(255)).unwrap_or_default();
            out.extend_from_slice(&[*protocol, spi.len() as u8]);
            out.extend_from_slice(&kind.to_be_bytes());
            out.extend_from_slice(spi);
            out.extend_from_slice(data);
        }
        Payload::Delete { protocol, spis } => {
            let spi_size = if *protocol == 1 && spis.is_empty() { 0 } else { 4 };
            let spis = spis.get(..spis.len().min(usize::from(u16::MAX))).unwrap_or_default();
            out.extend_from_slice(&[*protocol, spi_size]);
            out.extend_from_slice(&len16(spis.len()).to_be_bytes());
            for s in spis {
                out.extend_from_slice(&s.to_be_bytes());
            }
        }
        Payload::TsI(ts) | Payload::TsR(ts) => super::ts::encode_ts(ts, out),
        Payload::Sk { body, .. } => out.extend_from_slice(body),
        Payload::Cp { kind, attributes } => {
            out.extend_from_slice(&[*kind, 0, 0, 0]);
            for a in attributes {
                out.extend_from_slice(&(a.kind & 0x7fff).to_be_bytes());
                out.extend_from_slice(&len16(a.value.len()).to_be_bytes());
                out.extend_from_slice(&a.value);
            }
        }
        Payload::Skf { number, total, body, .. } => {
            out.extend_from_slice(&number.to_be_bytes());
            out.extend_from_slice(&total.to_be_bytes());
            out.extend_from_slice(body);
        }
    }
}
