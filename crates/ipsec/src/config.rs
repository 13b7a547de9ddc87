//! What a security association is configured with: algorithms, keys,
//! lifetimes, and the checks that make a configuration usable
//! ([`SaConfig::validate`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use zeroize::Zeroize;

/// The largest anti-replay window accepted, in packets.
pub const MAX_REPLAY_WINDOW: u32 = 4096;

/// The encryption algorithm of an SA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cipher {
    /// AES-GCM with a 16-byte ICV (RFC 4106); key = 16 bytes + 4 of salt.
    Aes128Gcm,
    /// AES-GCM with a 16-byte ICV (RFC 4106); key = 32 bytes + 4 of salt.
    Aes256Gcm,
    /// AES-CBC (RFC 3602), 16-byte IV; needs an HMAC.
    Aes128Cbc,
    /// AES-CBC (RFC 3602), 16-byte IV; needs an HMAC.
    Aes256Cbc,
}

impl Cipher {
    pub const ALL: [Cipher; 4] = [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Aes128Cbc, Cipher::Aes256Cbc];

    /// The configuration name ("aes-128-gcm", ...).
    pub const fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "aes-128-gcm",
            Cipher::Aes256Gcm => "aes-256-gcm",
            Cipher::Aes128Cbc => "aes-128-cbc",
            Cipher::Aes256Cbc => "aes-256-cbc",
        }
    }

    /// An AEAD (GCM): integrity comes with the cipher.
    pub const fn is_aead(self) -> bool {
        matches!(self, Cipher::Aes128Gcm | Cipher::Aes256Gcm)
    }

    /// The key length in bytes the configuration gives (GCM: with the salt).
    pub const fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Gcm => 16 + 4,
            Cipher::Aes256Gcm => 32 + 4,
            Cipher::Aes128Cbc => 16,
            Cipher::Aes256Cbc => 32,
        }
    }

    /// The IV carried in each packet: 8 bytes (GCM, RFC 4106), 16 (CBC).
    pub const fn iv_len(self) -> usize {
        if self.is_aead() { 8 } else { 16 }
    }

    /// What the ciphertext is aligned to: 4 bytes (GCM, ESP's minimum),
    /// the AES block (CBC).
    pub const fn align(self) -> usize {
        if self.is_aead() { 4 } else { 16 }
    }
}

impl fmt::Display for Cipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Cipher {
    type Err = SaError;
    fn from_str(s: &str) -> Result<Self, SaError> {
        Cipher::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| SaError::UnknownCipher(s.to_owned()))
    }
}

/// The integrity algorithm of an SA (none for GCM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Integ {
    None,
    /// RFC 2404: HMAC-SHA-1, 20-byte key, 12-byte ICV.
    HmacSha1_96,
    /// RFC 4868: HMAC-SHA-256, 32-byte key, 16-byte ICV.
    HmacSha256_128,
    /// RFC 4868: HMAC-SHA-512, 64-byte key, 32-byte ICV.
    HmacSha512_256,
}

impl Integ {
    pub const ALL: [Integ; 4] = [Integ::None, Integ::HmacSha1_96, Integ::HmacSha256_128, Integ::HmacSha512_256];

    /// The configuration name ("none", "hmac-sha1-96", ...).
    pub const fn name(self) -> &'static str {
        match self {
            Integ::None => "none",
            Integ::HmacSha1_96 => "hmac-sha1-96",
            Integ::HmacSha256_128 => "hmac-sha256-128",
            Integ::HmacSha512_256 => "hmac-sha512-256",
        }
    }

    /// The key length in bytes (RFC 2404, RFC 4868: the hash's output).
    pub const fn key_len(self) -> usize {
        match self {
            Integ::None => 0,
            Integ::HmacSha1_96 => 20,
            Integ::HmacSha256_128 => 32,
            Integ::HmacSha512_256 => 64,
        }
    }

    /// The truncated ICV length in bytes.
    pub const fn icv_len(self) -> usize {
        match self {
            Integ::None => 0,
            Integ::HmacSha1_96 => 12,
            Integ::HmacSha256_128 => 16,
            Integ::HmacSha512_256 => 32,
        }
    }
}

impl fmt::Display for Integ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Integ {
    type Err = SaError;
    fn from_str(s: &str) -> Result<Self, SaError> {
        Integ::ALL.into_iter().find(|c| c.name() == s).ok_or_else(|| SaError::UnknownInteg(s.to_owned()))
    }
}

macro_rules! serde_as_str {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_as_str!(Cipher);
serde_as_str!(Integ);

/// Secret key bytes: zeroized when dropped, never printed (`Debug` says
/// `<redacted>`). Serialized (for the API's requests) as "0x" and hex.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Key(Vec<u8>);

impl Key {
    /// A key from its bytes.
    pub fn new(bytes: Vec<u8>) -> Key {
        Key(bytes)
    }

    /// A key from "0x" and an even number of hex digits (the "0x" may be
    /// left out; an empty string is the empty key).
    pub fn from_hex(s: &str) -> Result<Key, SaError> {
        let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")).unwrap_or(s);
        if !h.len().is_multiple_of(2) {
            return Err(SaError::BadHex("odd number of hex digits".into()));
        }
        let digit = |c: u8| match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(SaError::BadHex(format!("{:?} is not a hex digit", char::from(c)))),
        };
        let mut v = Vec::with_capacity(h.len() / 2);
        for pair in h.as_bytes().chunks_exact(2) {
            if let [a, b] = pair {
                v.push(digit(*a)? << 4 | digit(*b)?);
            }
        }
        Ok(Key(v))
    }

    /// "0x" and the bytes in hex (for the API's requests; never logged).
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(2 + 2 * self.0.len());
        s.push_str("0x");
        for b in &self.0 {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Serialize for Key {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut s = String::deserialize(d)?;
        let k = Key::from_hex(&s).map_err(serde::de::Error::custom);
        s.zeroize();
        k
    }
}

/// Soft or hard limits of an SA's life; `None` is no limit. Time is
/// counted from the SA's installation ([`crate::SaDb::add`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Lifetime {
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    pub secs: Option<u64>,
}

/// ESP in UDP (RFC 3948): the outer UDP ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UdpEncap {
    pub src_port: u16,
    pub dst_port: u16,
}

impl Default for UdpEncap {
    fn default() -> Self {
        UdpEncap { src_port: 4500, dst_port: 4500 }
    }
}

/// One security association as configured (`[[ipsec_sa]]`, the API).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaConfig {
    pub id: u32,
    pub spi: u32,
    /// `crypto` in the configuration file.
    #[serde(alias = "crypto")]
    pub cipher: Cipher,
    #[serde(default = "integ_none")]
    pub integ: Integ,
    pub key: Key,
    #[serde(default)]
    pub integ_key: Key,
    #[serde(default)]
    pub esn: bool,
    /// Packets; 0 switches anti-replay off.
    #[serde(default = "default_window")]
    pub replay_window: u32,
    /// `false`/absent: none; `true`: ports 4500/4500; a table: those ports.
    #[serde(default, deserialize_with = "udp_encap_de")]
    pub udp_encap: Option<UdpEncap>,
    #[serde(default)]
    pub soft: Lifetime,
    #[serde(default)]
    pub hard: Lifetime,
}

fn integ_none() -> Integ {
    Integ::None
}

/// The default anti-replay window (packets).
pub const DEFAULT_REPLAY_WINDOW: u32 = 1024;

fn default_window() -> u32 {
    DEFAULT_REPLAY_WINDOW
}

fn udp_encap_de<'de, D: Deserializer<'de>>(d: D) -> Result<Option<UdpEncap>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Flag(bool),
        Ports(UdpEncap),
    }
    Ok(match Option::<Either>::deserialize(d)? {
        None | Some(Either::Flag(false)) => None,
        Some(Either::Flag(true)) => Some(UdpEncap::default()),
        Some(Either::Ports(p)) => Some(p),
    })
}

impl SaConfig {
    /// Checks that the SA can be installed: key lengths per algorithm, GCM
    /// without an HMAC, CBC with one, the replay window's size, the SPI
    /// outside the reserved 0..=255 (RFC 4303 section 2.1), soft limits
    /// below hard ones.
    pub fn validate(&self) -> Result<(), SaError> {
        if self.spi <= 255 {
            return Err(SaError::ReservedSpi(self.spi));
        }
        match (self.cipher.is_aead(), self.integ) {
            (true, Integ::None) | (false, Integ::HmacSha1_96 | Integ::HmacSha256_128 | Integ::HmacSha512_256) => {}
            (true, integ) => return Err(SaError::AeadWithInteg { cipher: self.cipher, integ }),
            (false, _) => return Err(SaError::CbcWithoutInteg(self.cipher)),
        }
        if self.key.len() != self.cipher.key_len() {
            return Err(SaError::KeyLength {
                what: self.cipher.name(),
                expected: self.cipher.key_len(),
                got: self.key.len(),
            });
        }
        if self.integ_key.len() != self.integ.key_len() {
            return Err(SaError::KeyLength {
                what: self.integ.name(),
                expected: self.integ.key_len(),
                got: self.integ_key.len(),
            });
        }
        if self.replay_window > MAX_REPLAY_WINDOW {
            return Err(SaError::ReplayWindow(self.replay_window));
        }
        let pairs = [
            ("packets", self.soft.packets, self.hard.packets),
            ("bytes", self.soft.bytes, self.hard.bytes),
            ("secs", self.soft.secs, self.hard.secs),
        ];
        for (what, soft, hard) in pairs {
            if let (Some(s), Some(h)) = (soft, hard)
                && s > h
            {
                return Err(SaError::SoftAfterHard(what));
            }
        }
        Ok(())
    }
}

/// Why an SA could not be configured, installed or found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaError {
    #[error("unknown cipher {0:?} (aes-128-gcm, aes-256-gcm, aes-128-cbc, aes-256-cbc)")]
    UnknownCipher(String),
    #[error("unknown integrity algorithm {0:?} (none, hmac-sha1-96, hmac-sha256-128, hmac-sha512-256)")]
    UnknownInteg(String),
    #[error("bad hex key: {0}")]
    BadHex(String),
    #[error("{what} needs a {expected}-byte key, got {got} bytes")]
    KeyLength { what: &'static str, expected: usize, got: usize },
    #[error("{cipher} is an AEAD: integ must be none, not {integ}")]
    AeadWithInteg { cipher: Cipher, integ: Integ },
    #[error("{0} needs an integrity algorithm (hmac-sha1-96, hmac-sha256-128, hmac-sha512-256)")]
    CbcWithoutInteg(Cipher),
    #[error("replay window {0} is larger than the maximum {MAX_REPLAY_WINDOW}")]
    ReplayWindow(u32),
    #[error("SPI {0} is reserved (0..=255, RFC 4303 section 2.1)")]
    ReservedSpi(u32),
    #[error("soft lifetime in {0} exceeds the hard one")]
    SoftAfterHard(&'static str),
    #[error("SA {0} already exists")]
    Exists(u32),
    #[error("no SA {0}")]
    NotFound(u32),
    #[error("SA id {0} given twice in one batch")]
    DuplicateInBatch(u32),
    #[error("SA {id}: {source}")]
    InBatch {
        id: u32,
        #[source]
        source: Box<SaError>,
    },
}
