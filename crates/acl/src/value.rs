//! The value types a rule is written with: prefixes, numeric ranges with
//! symbolic names, TCP flag patterns and interface names, each parsed from
//! the TOML scalar a person writes (`"10.0.0.0/8"`, `"1000-2000"`, `80`,
//! `"echo-request"`, `"syn,!ack"`), and lists of them.
//!
//! Parsing happens during deserialisation, so a malformed value is reported
//! by the TOML parser together with its line and column.

use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::str::FromStr;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use crate::names;

/// A scalar as it appears in TOML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scalar {
    Int(i64),
    Str(String),
}

/// One element of a list-valued rule key.
pub trait Item: Sized + Clone + fmt::Debug + PartialEq {
    /// What the element is, for error messages ("port or port range").
    const WHAT: &'static str;
    /// Parses the textual form.
    fn from_text(s: &str) -> Result<Self, String>;
    /// Parses an integer form.
    fn from_int(v: i64) -> Result<Self, String> {
        Err(format!("expected a string ({}), found the integer {v}", Self::WHAT))
    }
    /// The TOML scalar that reads back as this element.
    fn to_scalar(&self) -> Scalar;
}

/// A list-valued key: written as one scalar or as an array of scalars. The
/// elements are alternatives (a packet matches the key if it matches any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

impl<T> List<T> {
    pub fn one(v: T) -> Self {
        List(vec![v])
    }
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

impl<T> From<Vec<T>> for List<T> {
    fn from(v: Vec<T>) -> Self {
        List(v)
    }
}

struct ItemDe<T>(T);

impl<'de, T: Item> Deserialize<'de> for ItemDe<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<T: Item> Visitor<'_> for V<T> {
            type Value = ItemDe<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a {}", T::WHAT)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                T::from_text(s).map(ItemDe).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                T::from_int(v).map(ItemDe).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                let v = i64::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))?;
                T::from_int(v).map(ItemDe).map_err(E::custom)
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<'de, T: Item> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Item> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a {} or an array of them", T::WHAT)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                T::from_text(s).map(List::one).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                T::from_int(v).map(List::one).map_err(E::custom)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                let v = i64::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))?;
                T::from_int(v).map(List::one).map_err(E::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(ItemDe(v)) = seq.next_element::<ItemDe<T>>()? {
                    out.push(v);
                }
                Ok(List(out))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

impl<T: Item> Serialize for List<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        fn one<S: Serializer>(s: S, v: Scalar) -> Result<S::Ok, S::Error> {
            match v {
                Scalar::Int(i) => s.serialize_i64(i),
                Scalar::Str(t) => s.serialize_str(&t),
            }
        }
        if let [only] = self.0.as_slice() {
            return one(s, only.to_scalar());
        }
        struct El(Scalar);
        impl Serialize for El {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                match &self.0 {
                    Scalar::Int(i) => s.serialize_i64(*i),
                    Scalar::Str(t) => s.serialize_str(t),
                }
            }
        }
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for v in &self.0 {
            seq.serialize_element(&El(v.to_scalar()))?;
        }
        seq.end()
    }
}

// ---------------------------------------------------------------- prefixes

/// An IPv4 or IPv6 prefix (address and length), host bits zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

#[allow(clippy::len_without_is_empty)]
impl Prefix {
    /// Makes a prefix; refuses a length beyond the family's width and set
    /// host bits (a typo such as `10.0.0.1/8` would otherwise silently mean
    /// something other than what was written).
    pub fn new(addr: IpAddr, len: u8) -> Result<Self, String> {
        let width = if addr.is_ipv6() { 128 } else { 32 };
        if len > width {
            return Err(format!("prefix length {len} exceeds {width}"));
        }
        let p = Prefix { addr, len };
        let (lo, _) = p.range();
        if lo != p.bits() {
            let net = Prefix::from_bits(lo, addr.is_ipv6(), len);
            return Err(format!("{addr}/{len} has host bits set (did you mean {net}?)"));
        }
        Ok(p)
    }

    /// Makes a prefix, clearing host bits.
    pub fn new_truncating(addr: IpAddr, len: u8) -> Self {
        let v6 = addr.is_ipv6();
        let len = len.min(if v6 { 128 } else { 32 });
        let p = Prefix { addr, len };
        Prefix::from_bits(p.range().0, v6, len)
    }

    pub(crate) fn from_bits(bits: u128, v6: bool, len: u8) -> Self {
        let addr = if v6 { IpAddr::V6(bits.into()) } else { IpAddr::V4((bits as u32).into()) };
        Prefix { addr, len }
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }
    pub fn len(&self) -> u8 {
        self.len
    }
    pub fn is_v6(&self) -> bool {
        self.addr.is_ipv6()
    }

    /// The address as an integer in its family's space (IPv4 in the low 32
    /// bits), the convention of [`crate::PacketKey`].
    pub fn bits(&self) -> u128 {
        match self.addr {
            IpAddr::V4(a) => u32::from(a) as u128,
            IpAddr::V6(a) => u128::from(a),
        }
    }

    /// First and last address covered, in the family's integer space.
    pub fn range(&self) -> (u128, u128) {
        let width = if self.is_v6() { 128u32 } else { 32 };
        let host = width - self.len as u32;
        let span: u128 = if host >= 128 { u128::MAX } else { (1u128 << host) - 1 };
        let lo = self.bits() & !span;
        (lo, lo | span)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| format!("{s:?} is not an IPv4/IPv6 address or prefix"))?;
        let len = match l {
            Some(l) => l.parse::<u8>().map_err(|_| format!("bad prefix length in {s:?}"))?,
            None => {
                if addr.is_ipv6() {
                    128
                } else {
                    32
                }
            }
        };
        Prefix::new(addr, len)
    }
}

impl Item for Prefix {
    const WHAT: &'static str = "IPv4/IPv6 address or prefix";
    fn from_text(s: &str) -> Result<Self, String> {
        s.parse()
    }
    fn to_scalar(&self) -> Scalar {
        Scalar::Str(self.to_string())
    }
}

// ------------------------------------------------------------ number ranges

/// What a [`NumRange`] counts: its maximum, its names, its description.
pub trait RangeKind: Clone + fmt::Debug + PartialEq {
    const MAX: u32;
    const NAMES: &'static [(&'static str, u8)];
    const WHAT: &'static str;
}

/// An inclusive range of numbers `lo..=hi` written `80`, `"80"`,
/// `"1000-2000"`, or with a symbolic name (`"tcp"`, `"echo-request"`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NumRange<K> {
    pub lo: u32,
    pub hi: u32,
    _k: PhantomData<K>,
}

impl<K: RangeKind> NumRange<K> {
    /// A range; `None` if `lo > hi` or beyond the kind's maximum.
    pub fn new(lo: u32, hi: u32) -> Option<Self> {
        (lo <= hi && hi <= K::MAX).then_some(NumRange { lo, hi, _k: PhantomData })
    }
    /// A single value.
    pub fn single(v: u32) -> Option<Self> {
        Self::new(v, v)
    }
    /// Whether `v` is in the range.
    pub fn contains(&self, v: u32) -> bool {
        self.lo <= v && v <= self.hi
    }

    fn parse_one(s: &str) -> Result<u32, String> {
        let s = s.trim();
        if let Ok(v) = s.parse::<u32>() {
            if v > K::MAX {
                return Err(format!("{v} is larger than {} (the largest {})", K::MAX, K::WHAT));
            }
            return Ok(v);
        }
        if let Some(h) = s.strip_prefix("0x")
            && let Ok(v) = u32::from_str_radix(h, 16)
            && v <= K::MAX
        {
            return Ok(v);
        }
        names::lookup(K::NAMES, s).map(u32::from).ok_or_else(|| format!("{s:?} is not a {}", K::WHAT))
    }
}

impl<K> fmt::Debug for NumRange<K> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}-{}", self.lo, self.hi)
    }
}

impl<K: RangeKind> fmt::Display for NumRange<K> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.to_scalar() {
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Str(s) => f.write_str(&s),
        }
    }
}

impl<K: RangeKind> Item for NumRange<K> {
    const WHAT: &'static str = K::WHAT;
    fn from_text(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if let Ok(v) = Self::parse_one(s) {
            return Ok(NumRange { lo: v, hi: v, _k: PhantomData });
        }
        // Names contain dashes ("echo-request"), so try every split point.
        for (i, _) in s.match_indices('-') {
            let (a, b) = (&s[..i], &s[i + 1..]);
            if let (Ok(lo), Ok(hi)) = (Self::parse_one(a), Self::parse_one(b)) {
                return Self::new(lo, hi).ok_or_else(|| format!("range {s:?} is empty (start > end)"));
            }
        }
        Err(match Self::parse_one(s) {
            Err(e) if !s.contains('-') => e,
            _ => format!("{s:?} is not a {} or a range of them (\"a-b\")", K::WHAT),
        })
    }
    fn from_int(v: i64) -> Result<Self, String> {
        u32::try_from(v).ok().and_then(Self::single).ok_or_else(|| format!("{v} is not a {} (0-{})", K::WHAT, K::MAX))
    }
    fn to_scalar(&self) -> Scalar {
        if self.lo == self.hi {
            match u8::try_from(self.lo).ok().and_then(|v| names::name_of(K::NAMES, v)) {
                Some(n) => Scalar::Str(n.to_string()),
                None => Scalar::Int(self.lo as i64),
            }
        } else {
            Scalar::Str(format!("{}-{}", self.lo, self.hi))
        }
    }
}

macro_rules! kind {
    ($(#[$m:meta])* $name:ident, $alias:ident, $max:expr, $names:expr, $what:expr) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub struct $name;
        impl RangeKind for $name {
            const MAX: u32 = $max;
            const NAMES: &'static [(&'static str, u8)] = $names;
            const WHAT: &'static str = $what;
        }
        $(#[$m])*
        pub type $alias = NumRange<$name>;
    };
}

kind!(
    /// TCP/UDP/SCTP/UDP-Lite/DCCP port or range.
    PortKind, PortRange, 65535, &[], "port or port range"
);
kind!(
    /// IP protocol number (IPv6: the upper-layer protocol) or name.
    ProtoKind, ProtoRange, 255, names::PROTOCOLS, "IP protocol number or name"
);
kind!(
    /// ICMP (v4) type, RFC 792.
    IcmpTypeKind, IcmpTypeRange, 255, names::ICMP_TYPES, "ICMP type"
);
kind!(
    /// ICMP (v4) code.
    IcmpCodeKind, IcmpCodeRange, 255, names::ICMP_CODES, "ICMP code"
);
kind!(
    /// ICMPv6 type, RFC 4443.
    Icmpv6TypeKind, Icmpv6TypeRange, 255, names::ICMPV6_TYPES, "ICMPv6 type"
);
kind!(
    /// ICMPv6 code.
    Icmpv6CodeKind, Icmpv6CodeRange, 255, names::ICMPV6_CODES, "ICMPv6 code"
);
kind!(
    /// 802.1Q VLAN id (0 = untagged), IEEE 802.1Q VID is 12 bits.
    VlanKind, VlanRange, 4095, &[], "VLAN id (0-4095)"
);
kind!(
    /// DSCP code point (6 bits, RFC 2474).
    DscpKind, DscpRange, 63, names::DSCP, "DSCP value (0-63) or name"
);

// --------------------------------------------------------------- TCP flags

/// A TCP flags pattern: flags listed must be set, flags listed with `!`
/// must be clear, the others are ignored (`"syn,!ack"`: mask SYN|ACK,
/// value SYN). A packet matches if `flags & mask == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcpFlags {
    pub mask: u8,
    pub value: u8,
}

impl TcpFlags {
    pub fn new(mask: u8, value: u8) -> Self {
        TcpFlags { mask, value: value & mask }
    }
    pub fn matches(&self, flags: u8) -> bool {
        flags & self.mask == self.value
    }
}

impl fmt::Display for TcpFlags {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let mut first = true;
        for &(name, bit) in names::TCP_FLAGS {
            if self.mask & bit == 0 {
                continue;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if self.value & bit == 0 {
                f.write_str("!")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

impl Item for TcpFlags {
    const WHAT: &'static str = "TCP flags pattern such as \"syn,!ack\"";
    fn from_text(s: &str) -> Result<Self, String> {
        let (mut mask, mut value) = (0u8, 0u8);
        for tok in s.split(',').map(str::trim) {
            let (neg, name) = match tok.strip_prefix('!') {
                Some(n) => (true, n.trim()),
                None => (false, tok),
            };
            let bit = names::lookup(names::TCP_FLAGS, name).ok_or_else(|| {
                format!("{name:?} is not a TCP flag (fin, syn, rst, psh, ack, urg, ece, cwr) in {s:?}")
            })?;
            if mask & bit != 0 {
                return Err(format!("flag {name:?} appears twice in {s:?}"));
            }
            mask |= bit;
            if !neg {
                value |= bit;
            }
        }
        Ok(TcpFlags { mask, value })
    }
    fn to_scalar(&self) -> Scalar {
        Scalar::Str(self.to_string())
    }
}

// ----------------------------------------------------------- interfaces

/// An interface name (resolved to tern's interface index when the rule set
/// is compiled).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IfName(pub String);

impl Item for IfName {
    const WHAT: &'static str = "interface name";
    fn from_text(s: &str) -> Result<Self, String> {
        if s.is_empty() || s.len() > 64 || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("{s:?} is not a valid interface name"));
        }
        Ok(IfName(s.to_string()))
    }
    fn to_scalar(&self) -> Scalar {
        Scalar::Str(self.0.clone())
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_parse_and_refuse_host_bits() {
        let p: Prefix = "10.0.0.0/8".parse().unwrap();
        assert_eq!(p.range(), (0x0a00_0000, 0x0aff_ffff));
        let h: Prefix = "1.1.1.1".parse().unwrap();
        assert_eq!(h.len(), 32);
        let e = "10.0.0.1/8".parse::<Prefix>().unwrap_err();
        assert!(e.contains("10.0.0.0/8"), "{e}");
        let z: Prefix = "::/0".parse().unwrap();
        assert_eq!(z.range(), (0, u128::MAX));
        let v4z: Prefix = "0.0.0.0/0".parse().unwrap();
        assert_eq!(v4z.range(), (0, u32::MAX as u128));
        assert!("1.2.3.4/33".parse::<Prefix>().is_err());
        assert!("nonsense".parse::<Prefix>().is_err());
        assert_eq!(Prefix::new_truncating("10.1.2.3".parse().unwrap(), 8).to_string(), "10.0.0.0/8");
    }

    #[test]
    fn ranges_parse_names_and_dashes() {
        let r = PortRange::from_text("1000-2000").unwrap();
        assert_eq!((r.lo, r.hi), (1000, 2000));
        assert!(PortRange::from_text("2000-1000").is_err());
        assert!(PortRange::from_text("70000").is_err());
        assert!(PortRange::from_int(-1).is_err());
        let t = IcmpTypeRange::from_text("echo-request").unwrap();
        assert_eq!((t.lo, t.hi), (8, 8));
        let t = IcmpTypeRange::from_text("echo-reply-echo-request").unwrap();
        assert_eq!((t.lo, t.hi), (0, 8));
        assert_eq!(ProtoRange::from_text("tcp").unwrap().to_scalar(), Scalar::Str("tcp".into()));
        assert_eq!(PortRange::from_int(80).unwrap().to_scalar(), Scalar::Int(80));
        assert!(VlanRange::from_int(4096).is_err());
        assert_eq!(DscpRange::from_text("ef").unwrap().lo, 46);
    }

    #[test]
    fn tcp_flags_patterns() {
        let f = TcpFlags::from_text("syn,!ack").unwrap();
        assert_eq!((f.mask, f.value), (0x12, 0x02));
        assert!(f.matches(0x02) && f.matches(0x03) && !f.matches(0x12));
        assert_eq!(f.to_string(), "syn,!ack");
        assert!(TcpFlags::from_text("syn,!syn").is_err());
        assert!(TcpFlags::from_text("bogus").is_err());
    }

    #[test]
    fn lists_from_scalars_and_arrays() {
        #[derive(Deserialize, Serialize)]
        struct T {
            a: List<PortRange>,
            b: List<Prefix>,
        }
        let t: T = toml::from_str("a = [80, \"1000-2000\"]\nb = \"10.0.0.0/8\"").unwrap();
        assert_eq!(t.a.len(), 2);
        assert_eq!(t.b.0[0].len(), 8);
        let s = toml::to_string(&t).unwrap();
        let back: T = toml::from_str(&s).unwrap();
        assert_eq!(back.a, t.a);
        let e = toml::from_str::<T>("a = \"x\"\nb = \"1.1.1.1\"").err().unwrap().to_string();
        assert!(e.contains("line 1"), "{e}");
    }
}
