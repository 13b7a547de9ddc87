//! Traffic selectors (RFC 7296 3.13.1): TS_IPV4_ADDR_RANGE (7) and
//! TS_IPV6_ADDR_RANGE (8). Any other type is an error: the SA that carries
//! it fails (TS_UNACCEPTABLE), not silently narrower.

use super::WireError;
use super::payload::Reader;
use crate::config::TrafficSelector;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const TS_IPV4_ADDR_RANGE: u8 = 7;
pub const TS_IPV6_ADDR_RANGE: u8 = 8;

pub(super) fn decode_ts(kind: u8, body: &[u8]) -> Result<Vec<TrafficSelector>, WireError> {
    let short = WireError::Payload(kind, "traffic selector truncated");
    let mut r = Reader::new(body);
    let (Some(count), Some(_)) = (r.u8(), r.take(3)) else { return Err(short) };
    let mut out = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let (Some(ts_type), Some(protocol), Some(len), Some(start_port), Some(end_port)) =
            (r.u8(), r.u8(), r.u16(), r.u16(), r.u16())
        else {
            return Err(short);
        };
        let (start, end) = match (ts_type, len) {
            (TS_IPV4_ADDR_RANGE, 16) => {
                let (Some(s), Some(e)) = (r.u32(), r.u32()) else { return Err(short) };
                (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(e)))
            }
            (TS_IPV6_ADDR_RANGE, 40) => {
                let (Some(s), Some(e)) = (r.take(16), r.take(16)) else { return Err(short) };
                let s: [u8; 16] = s.try_into().map_err(|_| short)?;
                let e: [u8; 16] = e.try_into().map_err(|_| short)?;
                (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(e)))
            }
            (TS_IPV4_ADDR_RANGE | TS_IPV6_ADDR_RANGE, _) => {
                return Err(WireError::Payload(kind, "traffic selector length wrong for its type"));
            }
            _ => return Err(WireError::Payload(kind, "unsupported traffic selector type")),
        };
        out.push(TrafficSelector { start, end, protocol, start_port, end_port });
    }
    if !r.is_empty() {
        return Err(WireError::Payload(kind, "bytes after the traffic selectors"));
    }
    Ok(out)
}

/// Writes a TS payload's body. A selector whose ends are of different
/// families (not something tern builds) goes out as IPv6 with the IPv4 end
/// mapped (::ffff:a.b.c.d). At most 255 selectors fit.
pub(super) fn encode_ts(ts: &[TrafficSelector], out: &mut Vec<u8>) {
    let ts = ts.get(..ts.len().min(255)).unwrap_or_default();
    out.extend_from_slice(&[ts.len() as u8, 0, 0, 0]);
    for t in ts {
        match (t.start, t.end) {
            (IpAddr::V4(s), IpAddr::V4(e)) => {
                out.extend_from_slice(&[TS_IPV4_ADDR_RANGE, t.protocol, 0, 16]);
                out.extend_from_slice(&t.start_port.to_be_bytes());
                out.extend_from_slice(&t.end_port.to_be_bytes());
                out.extend_from_slice(&s.octets());
                out.extend_from_slice(&e.octets());
            }
            (s, e) => {
                let v6 = |a: IpAddr| match a {
                    IpAddr::V4(a) => a.to_ipv6_mapped(),
                    IpAddr::V6(a) => a,
                };
                out.extend_from_slice(&[TS_IPV6_ADDR_RANGE, t.protocol, 0, 40]);
                out.extend_from_slice(&t.start_port.to_be_bytes());
                out.extend_from_slice(&t.end_port.to_be_bytes());
                out.extend_from_slice(&v6(s).octets());
                out.extend_from_slice(&v6(e).octets());
            }
        }
    }
}
