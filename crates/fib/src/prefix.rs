//! IP prefixes: an address and a length, host bits always clear.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IPv4 or IPv6 prefix. The constructor and the parser refuse host bits
/// set past the length, so two equal networks are always equal values (the
/// RIB is keyed by `Prefix`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Prefix {
    V4 { addr: Ipv4Addr, len: u8 },
    V6 { addr: Ipv6Addr, len: u8 },
}

/// Why a prefix was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// No '/' or the address part does not parse.
    BadAddress(String),
    /// The length is missing, not a number or too long for the family.
    BadLength(String),
    /// Bits are set after the prefix length ("10.0.0.1/8").
    HostBitsSet(String),
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::BadAddress(s) => write!(f, "bad address in prefix {s:?}"),
            PrefixError::BadLength(s) => write!(f, "bad prefix length in {s:?}"),
            PrefixError::HostBitsSet(s) => write!(f, "host bits set in prefix {s:?}"),
        }
    }
}

impl std::error::Error for PrefixError {}

/// The mask of the `len` leading bits of a 32-bit word (len 0..=32).
#[inline]
pub(crate) fn mask32(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) }
}

/// The mask of the `len` leading bits of a 128-bit word (len 0..=128).
#[inline]
pub(crate) fn mask128(len: u8) -> u128 {
    if len == 0 { 0 } else { u128::MAX << (128 - u32::from(len.min(128))) }
}

impl Prefix {
    /// A v4 prefix; `None` if `len > 32` or host bits are set.
    pub fn v4(addr: Ipv4Addr, len: u8) -> Option<Prefix> {
        (len <= 32 && u32::from(addr) & !mask32(len) == 0).then_some(Prefix::V4 { addr, len })
    }

    /// A v6 prefix; `None` if `len > 128` or host bits are set.
    pub fn v6(addr: Ipv6Addr, len: u8) -> Option<Prefix> {
        (len <= 128 && u128::from(addr) & !mask128(len) == 0).then_some(Prefix::V6 { addr, len })
    }

    /// The prefix of length `len` containing `addr` (host bits cleared);
    /// `None` if `len` is too long for the family.
    pub fn new_truncated(addr: IpAddr, len: u8) -> Option<Prefix> {
        match addr {
            IpAddr::V4(a) if len <= 32 => Some(Prefix::V4 { addr: Ipv4Addr::from(u32::from(a) & mask32(len)), len }),
            IpAddr::V6(a) if len <= 128 => Some(Prefix::V6 { addr: Ipv6Addr::from(u128::from(a) & mask128(len)), len }),
            _ => None,
        }
    }

    /// The host route (/32 or /128) of an address.
    pub fn host(addr: IpAddr) -> Prefix {
        match addr {
            IpAddr::V4(addr) => Prefix::V4 { addr, len: 32 },
            IpAddr::V6(addr) => Prefix::V6 { addr, len: 128 },
        }
    }

    /// The prefix length in bits (not a size: a /0 is not "empty").
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u8 {
        match *self {
            Prefix::V4 { len, .. } | Prefix::V6 { len, .. } => len,
        }
    }

    /// True for the default route (length 0).
    pub fn is_default(&self) -> bool {
        self.len() == 0
    }

    pub fn is_v4(&self) -> bool {
        matches!(self, Prefix::V4 { .. })
    }

    pub fn is_v6(&self) -> bool {
        matches!(self, Prefix::V6 { .. })
    }

    pub fn addr(&self) -> IpAddr {
        match *self {
            Prefix::V4 { addr, .. } => IpAddr::V4(addr),
            Prefix::V6 { addr, .. } => IpAddr::V6(addr),
        }
    }

    /// The address bits left-aligned in a u128 (v4 in the top 32 bits), so
    /// both families share one trie walker.
    pub fn bits128(&self) -> u128 {
        match *self {
            Prefix::V4 { addr, .. } => u128::from(u32::from(addr)) << 96,
            Prefix::V6 { addr, .. } => u128::from(addr),
        }
    }

    /// The maximum length for this prefix's family (32 or 128).
    pub fn max_len(&self) -> u8 {
        if self.is_v4() { 32 } else { 128 }
    }

    /// True if `addr` is of the same family and inside the prefix.
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (*self, addr) {
            (Prefix::V4 { addr: p, len }, IpAddr::V4(a)) => (u32::from(a) ^ u32::from(p)) & mask32(len) == 0,
            (Prefix::V6 { addr: p, len }, IpAddr::V6(a)) => (u128::from(a) ^ u128::from(p)) & mask128(len) == 0,
            _ => false,
        }
    }

    /// True if `other` is of the same family and inside (or equal to) self.
    pub fn covers(&self, other: &Prefix) -> bool {
        other.len() >= self.len() && self.contains(other.addr())
    }

    /// The covering prefix one bit shorter; `None` for a default route.
    pub fn parent(&self) -> Option<Prefix> {
        let len = self.len().checked_sub(1)?;
        Prefix::new_truncated(self.addr(), len)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Prefix::V4 { addr, len } => write!(f, "{addr}/{len}"),
            Prefix::V6 { addr, len } => write!(f, "{addr}/{len}"),
        }
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;

    /// Parses "10.0.0.0/8" or "2001:db8::/32". A bare address is not a
    /// prefix (say /32 or /128 explicitly); host bits set is an error so a
    /// typo such as "10.1.0.0/8" is caught rather than silently widened.
    fn from_str(s: &str) -> Result<Prefix, PrefixError> {
        let (a, l) = s.split_once('/').ok_or_else(|| PrefixError::BadAddress(s.to_string()))?;
        let addr: IpAddr = a.parse().map_err(|_| PrefixError::BadAddress(s.to_string()))?;
        if l.is_empty() || l.len() > 3 || !l.bytes().all(|b| b.is_ascii_digit()) {
            return Err(PrefixError::BadLength(s.to_string()));
        }
        let len: u8 = l.parse().map_err(|_| PrefixError::BadLength(s.to_string()))?;
        let p = Prefix::new_truncated(addr, len).ok_or_else(|| PrefixError::BadLength(s.to_string()))?;
        if p.addr() != addr {
            return Err(PrefixError::HostBitsSet(s.to_string()));
        }
        Ok(p)
    }
}

/// Serialised as its text form ("10.0.0.0/8"), as the CLI prints it.
#[cfg(feature = "serde")]
impl serde::Serialize for Prefix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_displays_both_families() {
        for s in ["10.0.0.0/8", "0.0.0.0/0", "1.2.3.4/32", "2001:db8::/32", "::/0", "2001:db8::1/128"] {
            let p: Prefix = s.parse().expect(s);
            assert_eq!(p.to_string(), s);
        }
        let p: Prefix = "192.168.1.0/24".parse().expect("v4");
        assert_eq!(p.len(), 24);
        assert!(p.is_v4());
        assert!(p.contains("192.168.1.200".parse().expect("ip")));
        assert!(!p.contains("192.168.2.1".parse().expect("ip")));
        assert!(!p.contains("::1".parse().expect("ip")));
    }

    #[test]
    fn refuses_bad_prefixes() {
        assert!(matches!("10.1.0.0/8".parse::<Prefix>(), Err(PrefixError::HostBitsSet(_))));
        assert!(matches!("10.0.0.0/33".parse::<Prefix>(), Err(PrefixError::BadLength(_))));
        assert!(matches!("2001:db8::/129".parse::<Prefix>(), Err(PrefixError::BadLength(_))));
        assert!(matches!("10.0.0.0/".parse::<Prefix>(), Err(PrefixError::BadLength(_))));
        assert!(matches!("10.0.0.0/+8".parse::<Prefix>(), Err(PrefixError::BadLength(_))));
        assert!(matches!("10.0.0.0".parse::<Prefix>(), Err(PrefixError::BadAddress(_))));
        assert!(matches!("10.0.0/8".parse::<Prefix>(), Err(PrefixError::BadAddress(_))));
        assert!(matches!("2001:db8::1/64".parse::<Prefix>(), Err(PrefixError::HostBitsSet(_))));
    }

    #[test]
    fn covers_and_parent() {
        let a: Prefix = "10.0.0.0/8".parse().expect("a");
        let b: Prefix = "10.1.0.0/16".parse().expect("b");
        assert!(a.covers(&b));
        assert!(!b.covers(&a));
        assert!(a.covers(&a));
        assert_eq!(b.parent().map(|p| p.to_string()), Some("10.0.0.0/15".to_string()));
        let d: Prefix = "0.0.0.0/0".parse().expect("d");
        assert_eq!(d.parent(), None);
        assert!(d.covers(&a));
    }
}
