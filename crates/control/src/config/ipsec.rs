//! IPsec in the configuration: an `[[ipsec_sa]]` (or an SA the API adds,
//! in the same shape) checked into an [`SaPlan`], and the rules of
//! `type = "ipsec"` tunnels that the file and the API share (key lengths,
//! algorithm pairs, the encapsulation's overhead).

use super::{IpsecSaCfg, SecretHex, quote};

/// A cipher tern's ESP nodes run: its name and sizes (RFC 4106 for GCM,
/// RFC 3602 for CBC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CipherSpec {
    pub name: &'static str,
    /// Key bytes, without GCM's salt.
    pub key_len: usize,
    /// GCM's salt (4 bytes after the key), 0 for CBC.
    pub salt_len: usize,
    /// Explicit IV in each packet.
    pub iv_len: usize,
    /// The payload is padded to a multiple of this (RFC 4303 2.4).
    pub block: usize,
    /// The AEAD's ICV (0: the HMAC brings it).
    pub icv_len: usize,
}

pub const CIPHERS: [CipherSpec; 4] = [
    CipherSpec { name: "aes-128-gcm", key_len: 16, salt_len: 4, iv_len: 8, block: 4, icv_len: 16 },
    CipherSpec { name: "aes-256-gcm", key_len: 32, salt_len: 4, iv_len: 8, block: 4, icv_len: 16 },
    CipherSpec { name: "aes-128-cbc", key_len: 16, salt_len: 0, iv_len: 16, block: 16, icv_len: 0 },
    CipherSpec { name: "aes-256-cbc", key_len: 32, salt_len: 0, iv_len: 16, block: 16, icv_len: 0 },
];

/// An integrity algorithm: name, key bytes and ICV bytes (RFC 2404, RFC
/// 4868).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntegSpec {
    pub name: &'static str,
    pub key_len: usize,
    pub icv_len: usize,
}

pub const INTEGS: [IntegSpec; 4] = [
    IntegSpec { name: "none", key_len: 0, icv_len: 0 },
    IntegSpec { name: "hmac-sha1-96", key_len: 20, icv_len: 12 },
    IntegSpec { name: "hmac-sha256-128", key_len: 32, icv_len: 16 },
    IntegSpec { name: "hmac-sha512-256", key_len: 64, icv_len: 32 },
];

/// The largest anti-replay window an SA may ask for.
pub const MAX_REPLAY_WINDOW: u32 = 4096;

/// RFC 3948's port for ESP in UDP.
pub const NAT_T_PORT: u16 = 4500;

/// Key bytes, zeroed when dropped; `Debug` never shows them.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyBytes(Vec<u8>);

impl KeyBytes {
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
    /// "0x" and the key in hex (what tern-ipsec's `Key::from_hex` reads).
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(2 + 2 * self.0.len());
        s.push_str("0x");
        for b in &self.0 {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

impl Drop for KeyBytes {
    fn drop(&mut self) {
        for b in self.0.iter_mut() {
            *b = 0;
        }
        std::hint::black_box(&self.0);
    }
}

impl std::fmt::Debug for KeyBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} key bytes>", self.0.len())
    }
}

/// Lifetime limits; None: no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LifetimePlan {
    pub packets: Option<u64>,
    pub bytes: Option<u64>,
    pub secs: Option<u64>,
}

/// An SA after validation.
#[derive(Clone, Debug, PartialEq)]
pub struct SaPlan {
    pub id: u32,
    pub spi: u32,
    pub cipher: CipherSpec,
    pub integ: IntegSpec,
    /// The cipher key, with GCM's salt at its end.
    pub key: KeyBytes,
    pub integ_key: Option<KeyBytes>,
    pub esn: bool,
    pub replay_window: u32,
    /// ESP in UDP: (source port, destination port).
    pub udp_encap: Option<(u16, u16)>,
    pub soft: LifetimePlan,
    pub hard: LifetimePlan,
}

/// Hex key material: "0x" and an even number of hex digits.
fn parse_key(s: &SecretHex) -> Result<KeyBytes, String> {
    let t = s.0.trim();
    // Never quote a key in a message: it may be a real one mistyped.
    let digits = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).ok_or("a key is \"0x\" and hex digits")?;
    if digits.is_empty() || digits.len() % 2 != 0 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("a key is \"0x\" and an even number of hex digits ({} characters given)", t.len()));
    }
    let bytes =
        (0..digits.len()).step_by(2).map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap_or_default()).collect();
    Ok(KeyBytes(bytes))
}

/// Checks one SA: the key the problem is under and its message, or the
/// SA. The one check for the file and the API's `ipsec_sa_add`.
pub fn sa_plan(c: &IpsecSaCfg) -> Result<SaPlan, (&'static str, String)> {
    if c.id == 0 {
        return Err(("id", "SA ids start at 1".into()));
    }
    if c.id >= super::IKE_SA_ID_BASE {
        return Err(("id", format!("{}: ids from 2^31 ({}) up are IKE's", c.id, super::IKE_SA_ID_BASE)));
    }
    let spi = c.spi.value().map_err(|m| ("spi", m))?;
    let cipher = *CIPHERS
        .iter()
        .find(|x| x.name == c.crypto)
        .ok_or_else(|| ("crypto", format!("{}: one of {}", quote(&c.crypto), CIPHERS.map(|x| x.name).join(", "))))?;
    let integ = *INTEGS
        .iter()
        .find(|x| x.name == c.integ)
        .ok_or_else(|| ("integ", format!("{}: one of {}", quote(&c.integ), INTEGS.map(|x| x.name).join(", "))))?;
    let aead = cipher.icv_len > 0;
    if aead && integ.key_len > 0 {
        return Err(("integ", format!("{} authenticates itself: integ must be \"none\"", cipher.name)));
    }
    if !aead && integ.key_len == 0 {
        return Err(("integ", format!("{} needs an integrity algorithm (ESP without one is refused)", cipher.name)));
    }
    let key = parse_key(&c.key).map_err(|m| ("key", m))?;
    let want = cipher.key_len + cipher.salt_len;
    if key.0.len() != want {
        let salt = if cipher.salt_len > 0 {
            format!(" ({} of key and a {}-byte salt)", cipher.key_len, cipher.salt_len)
        } else {
            String::new()
        };
        return Err(("key", format!("{} takes a {want}-byte key{salt}, not {} bytes", cipher.name, key.0.len())));
    }
    let integ_key = match (&c.integ_key, integ.key_len) {
        (None, 0) => None,
        (Some(_), 0) => return Err(("integ_key", format!("integ {} takes no key", quote(integ.name)))),
        (None, n) => return Err(("integ_key", format!("{} needs a {n}-byte integ_key", integ.name))),
        (Some(k), n) => {
            let k = parse_key(k).map_err(|m| ("integ_key", m))?;
            if k.0.len() != n {
                return Err(("integ_key", format!("{} takes a {n}-byte key, not {} bytes", integ.name, k.0.len())));
            }
            Some(k)
        }
    };
    if c.replay_window > MAX_REPLAY_WINDOW {
        return Err((
            "replay_window",
            format!("{}: need 0..={MAX_REPLAY_WINDOW} (0: no anti-replay)", c.replay_window),
        ));
    }
    let udp_encap = if c.udp_encap {
        let src = c.udp_src_port.unwrap_or(NAT_T_PORT);
        let dst = c.udp_dst_port.unwrap_or(NAT_T_PORT);
        for (key, p) in [("udp_src_port", src), ("udp_dst_port", dst)] {
            if p == 0 {
                return Err((key, "port 0 cannot be used".into()));
            }
            if key == "udp_src_port" && p == 500 {
                return Err((key, "port 500 is IKE's: ESP in UDP cannot be received there".into()));
            }
        }
        Some((src, dst))
    } else {
        for (key, p) in [("udp_src_port", c.udp_src_port), ("udp_dst_port", c.udp_dst_port)] {
            if p.is_some() {
                return Err((key, "UDP ports need udp_encap = true".into()));
            }
        }
        None
    };
    let soft = LifetimePlan { packets: c.soft_packets, bytes: c.soft_bytes, secs: c.soft_secs };
    let hard = LifetimePlan { packets: c.hard_packets, bytes: c.hard_bytes, secs: c.hard_secs };
    for (key, s, h) in [
        ("soft_packets", soft.packets, hard.packets),
        ("soft_bytes", soft.bytes, hard.bytes),
        ("soft_secs", soft.secs, hard.secs),
    ] {
        if s == Some(0) || h == Some(0) {
            return Err((key, "a lifetime of 0 would expire at once; leave the key out for none".into()));
        }
        if let (Some(s), Some(h)) = (s, h)
            && s > h
        {
            return Err((key, format!("the soft limit {s} is above the hard limit {h}")));
        }
    }
    Ok(SaPlan {
        id: c.id,
        spi,
        cipher,
        integ,
        key,
        integ_key,
        esn: c.esn,
        replay_window: c.replay_window,
        udp_encap,
        soft,
        hard,
    })
}

/// The most bytes ESP in tunnel mode adds to an inner packet of an SA:
/// the outer IP header, UDP's (encapsulated), the ESP header and IV,
/// padding to the cipher's block (at most block - 1), the trailer's two
/// bytes and the ICV.
pub fn esp_overhead(outer_v6: bool, sa: &SaPlan) -> usize {
    let outer = if outer_v6 { 40 } else { 20 };
    let udp = if sa.udp_encap.is_some() { 8 } else { 0 };
    outer + udp + 8 + sa.cipher.iv_len + (sa.cipher.block - 1) + 2 + sa.cipher.icv_len + sa.integ.icv_len
}

/// The largest inner MTU an ESP tunnel with this overhead carries within
/// the lanes' MTU.
pub fn ipsec_mtu_limit(overhead: usize) -> u16 {
    (usize::from(super::lane_mtu_limit(false))).saturating_sub(overhead) as u16
}
