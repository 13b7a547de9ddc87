//! Algorithms (IANA "IKEv2 Parameters" transform IDs), proposals in
//! strongSwan's syntax, and selection.
//!
//! Owner: helper "ike-wire" (parsing, wire conversion, selection).

/// Encryption (transform type 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encr {
    /// ENCR_AES_CBC (12) with a key of 128 or 256 bits.
    AesCbc { bits: u16 },
    /// ENCR_AES_GCM_16 (20), 16-byte ICV, with a key of 128 or 256 bits.
    AesGcm16 { bits: u16 },
}

/// Pseudo-random function (transform type 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Prf {
    HmacSha1,     // 2
    HmacSha2_256, // 5
    HmacSha2_384, // 6
    HmacSha2_512, // 7
}

/// Integrity (transform type 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Integ {
    HmacSha1_96,      // 2
    HmacSha2_256_128, // 12
    HmacSha2_384_192, // 13
    HmacSha2_512_256, // 14
}

/// Diffie-Hellman group (transform type 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DhGroup {
    Modp2048,   // 14
    Modp3072,   // 15
    Modp4096,   // 16
    Ecp256,     // 19
    Ecp384,     // 20
    Curve25519, // 31
}

/// What a proposal is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Ike,
    Esp,
}

/// One proposal: every listed algorithm of each type is acceptable (the
/// wire's transforms). An IKE proposal has encr, prf, dh and (without an
/// AEAD) integ; an ESP proposal has encr, integ unless AEAD, optional dh
/// (PFS) and esn.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Proposal {
    pub encr: Vec<Encr>,
    pub prf: Vec<Prf>,
    pub integ: Vec<Integ>,
    pub dh: Vec<DhGroup>,
    /// ESP: extended sequence numbers acceptable (true) / not (false); both
    /// may be listed. Empty for IKE.
    pub esn: Vec<bool>,
}

/// The algorithms an exchange settled on: one of each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub encr: Encr,
    pub prf: Option<Prf>,
    pub integ: Option<Integ>,
    pub dh: Option<DhGroup>,
    pub esn: bool,
}

use crate::wire::WireProposal;

/// Transform types (RFC 7296 3.3.2).
pub const TRANSFORM_ENCR: u8 = 1;
pub const TRANSFORM_PRF: u8 = 2;
pub const TRANSFORM_INTEG: u8 = 3;
pub const TRANSFORM_DH: u8 = 4;
pub const TRANSFORM_ESN: u8 = 5;

const ENCR_AES_CBC: u16 = 12;
const ENCR_AES_GCM_16: u16 = 20;

impl Encr {
    /// The ESP data plane's cipher (`None` for a key size it lacks, which
    /// tern never builds: only 128 and 256 bits parse).
    pub fn esp_cipher(self) -> Option<tern_ipsec::Cipher> {
        use tern_ipsec::Cipher;
        match self {
            Encr::AesCbc { bits: 128 } => Some(Cipher::Aes128Cbc),
            Encr::AesCbc { bits: 256 } => Some(Cipher::Aes256Cbc),
            Encr::AesGcm16 { bits: 128 } => Some(Cipher::Aes128Gcm),
            Encr::AesGcm16 { bits: 256 } => Some(Cipher::Aes256Gcm),
            _ => None,
        }
    }

    /// Key length in bytes (GCM: with its 4-byte salt, RFC 4106 8.1 /
    /// RFC 5282 7.1: what `prf+` must produce for it).
    pub fn key_len(self) -> usize {
        match self {
            Encr::AesCbc { bits } => usize::from(bits / 8),
            Encr::AesGcm16 { bits } => usize::from(bits / 8) + 4,
        }
    }

    /// Authenticated encryption: no integrity transform.
    pub fn is_aead(self) -> bool {
        matches!(self, Encr::AesGcm16 { .. })
    }

    /// (transform ID, key length attribute).
    pub fn to_id(self) -> (u16, Option<u16>) {
        match self {
            Encr::AesCbc { bits } => (ENCR_AES_CBC, Some(bits)),
            Encr::AesGcm16 { bits } => (ENCR_AES_GCM_16, Some(bits)),
        }
    }

    /// From a transform ID and its key length attribute (AES needs one:
    /// 128 or 256).
    pub fn from_id(id: u16, key_len: Option<u16>) -> Option<Encr> {
        match (id, key_len) {
            (ENCR_AES_CBC, Some(bits @ (128 | 256))) => Some(Encr::AesCbc { bits }),
            (ENCR_AES_GCM_16, Some(bits @ (128 | 256))) => Some(Encr::AesGcm16 { bits }),
            _ => None,
        }
    }

    /// strongSwan's name.
    pub fn name(self) -> &'static str {
        match self {
            Encr::AesCbc { bits: 128 } => "aes128",
            Encr::AesCbc { bits: 256 } => "aes256",
            Encr::AesCbc { .. } => "aes",
            Encr::AesGcm16 { bits: 128 } => "aes128gcm16",
            Encr::AesGcm16 { bits: 256 } => "aes256gcm16",
            Encr::AesGcm16 { .. } => "aesgcm16",
        }
    }
}

impl Prf {
    pub const ALL: [Prf; 4] = [Prf::HmacSha1, Prf::HmacSha2_256, Prf::HmacSha2_384, Prf::HmacSha2_512];

    pub fn id(self) -> u16 {
        match self {
            Prf::HmacSha1 => 2,
            Prf::HmacSha2_256 => 5,
            Prf::HmacSha2_384 => 6,
            Prf::HmacSha2_512 => 7,
        }
    }

    pub fn from_id(id: u16) -> Option<Prf> {
        Prf::ALL.into_iter().find(|p| p.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Prf::HmacSha1 => "prfsha1",
            Prf::HmacSha2_256 => "prfsha256",
            Prf::HmacSha2_384 => "prfsha384",
            Prf::HmacSha2_512 => "prfsha512",
        }
    }
}

impl Integ {
    pub const ALL: [Integ; 4] =
        [Integ::HmacSha1_96, Integ::HmacSha2_256_128, Integ::HmacSha2_384_192, Integ::HmacSha2_512_256];

    /// The ESP data plane's integrity algorithm. `None` for HMAC-SHA-384,
    /// which tern_ipsec lacks: ESP proposals never offer it
    /// ([`Proposal::parse`] refuses `sha384` in ESP proposals,
    /// [`Proposal::to_wire`] leaves it out) and [`select`] never accepts it
    /// for ESP.
    pub fn esp_integ(self) -> Option<tern_ipsec::Integ> {
        match self {
            Integ::HmacSha1_96 => Some(tern_ipsec::Integ::HmacSha1_96),
            Integ::HmacSha2_256_128 => Some(tern_ipsec::Integ::HmacSha256_128),
            Integ::HmacSha2_384_192 => None,
            Integ::HmacSha2_512_256 => Some(tern_ipsec::Integ::HmacSha512_256),
        }
    }

    /// Key length in bytes (the hash's output length, RFC 4868 2.1.1).
    pub fn key_len(self) -> usize {
        match self {
            Integ::HmacSha1_96 => 20,
            Integ::HmacSha2_256_128 => 32,
            Integ::HmacSha2_384_192 => 48,
            Integ::HmacSha2_512_256 => 64,
        }
    }

    /// The truncated MAC's length in bytes.
    pub fn icv_len(self) -> usize {
        match self {
            Integ::HmacSha1_96 => 12,
            Integ::HmacSha2_256_128 => 16,
            Integ::HmacSha2_384_192 => 24,
            Integ::HmacSha2_512_256 => 32,
        }
    }

    pub fn id(self) -> u16 {
        match self {
            Integ::HmacSha1_96 => 2,
            Integ::HmacSha2_256_128 => 12,
            Integ::HmacSha2_384_192 => 13,
            Integ::HmacSha2_512_256 => 14,
        }
    }

    pub fn from_id(id: u16) -> Option<Integ> {
        Integ::ALL.into_iter().find(|i| i.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Integ::HmacSha1_96 => "sha1",
            Integ::HmacSha2_256_128 => "sha256",
            Integ::HmacSha2_384_192 => "sha384",
            Integ::HmacSha2_512_256 => "sha512",
        }
    }

    /// The PRF strongSwan derives from an integrity algorithm when an IKE
    /// proposal names none.
    pub fn prf(self) -> Prf {
        match self {
            Integ::HmacSha1_96 => Prf::HmacSha1,
            Integ::HmacSha2_256_128 => Prf::HmacSha2_256,
            Integ::HmacSha2_384_192 => Prf::HmacSha2_384,
            Integ::HmacSha2_512_256 => Prf::HmacSha2_512,
        }
    }
}

impl DhGroup {
    pub const ALL: [DhGroup; 6] = [
        DhGroup::Modp2048,
        DhGroup::Modp3072,
        DhGroup::Modp4096,
        DhGroup::Ecp256,
        DhGroup::Ecp384,
        DhGroup::Curve25519,
    ];

    /// The group number (the KE payload's and INVALID_KE_PAYLOAD's).
    pub fn id(self) -> u16 {
        match self {
            DhGroup::Modp2048 => 14,
            DhGroup::Modp3072 => 15,
            DhGroup::Modp4096 => 16,
            DhGroup::Ecp256 => 19,
            DhGroup::Ecp384 => 20,
            DhGroup::Curve25519 => 31,
        }
    }

    pub fn from_id(id: u16) -> Option<DhGroup> {
        DhGroup::ALL.into_iter().find(|g| g.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            DhGroup::Modp2048 => "modp2048",
            DhGroup::Modp3072 => "modp3072",
            DhGroup::Modp4096 => "modp4096",
            DhGroup::Ecp256 => "ecp256",
            DhGroup::Ecp384 => "ecp384",
            DhGroup::Curve25519 => "x25519",
        }
    }
}

fn push_unique<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}

impl Proposal {
    /// Parses strongSwan's syntax (`aes128gcm16-prfsha256-x25519`,
    /// `aes256-sha256-modp3072`): algorithm names joined by `-`, several of
    /// a kind in preference order. Names: aes128 aes256 aes128gcm16
    /// aes256gcm16 (aes128gcm128, aes256gcm128 too); sha1 sha256 sha384
    /// sha512; prfsha1 prfsha256 prfsha384 prfsha512; modp2048 modp3072
    /// modp4096 ecp256 ecp384 x25519 (curve25519); esn noesn.
    ///
    /// As strongSwan: an IKE proposal without a PRF takes one per integrity
    /// algorithm (sha256 -> prfsha256), and without either is refused (so
    /// an AEAD-only IKE proposal names its PRF); AEAD proposals drop
    /// integrity algorithms; AEAD and classic ciphers do not mix in one
    /// proposal; an ESP proposal drops PRFs and without `esn` is `noesn`.
    /// MODP-768/1024 are refused: they are broken. sha384 is refused for
    /// ESP (tern's ESP data plane has no HMAC-SHA-384).
    pub fn parse(s: &str, protocol: Protocol) -> Result<Proposal, String> {
        let mut p = Proposal::default();
        for tok in s.trim().split('-') {
            let t = tok.trim().to_ascii_lowercase();
            match t.as_str() {
                "aes128" | "aes" => push_unique(&mut p.encr, Encr::AesCbc { bits: 128 }),
                "aes256" => push_unique(&mut p.encr, Encr::AesCbc { bits: 256 }),
                "aes128gcm16" | "aes128gcm128" => push_unique(&mut p.encr, Encr::AesGcm16 { bits: 128 }),
                "aes256gcm16" | "aes256gcm128" => push_unique(&mut p.encr, Encr::AesGcm16 { bits: 256 }),
                "sha1" | "sha" => push_unique(&mut p.integ, Integ::HmacSha1_96),
                "sha256" | "sha2_256" => push_unique(&mut p.integ, Integ::HmacSha2_256_128),
                "sha384" | "sha2_384" => push_unique(&mut p.integ, Integ::HmacSha2_384_192),
                "sha512" | "sha2_512" => push_unique(&mut p.integ, Integ::HmacSha2_512_256),
                "prfsha1" => push_unique(&mut p.prf, Prf::HmacSha1),
                "prfsha256" => push_unique(&mut p.prf, Prf::HmacSha2_256),
                "prfsha384" => push_unique(&mut p.prf, Prf::HmacSha2_384),
                "prfsha512" => push_unique(&mut p.prf, Prf::HmacSha2_512),
                "modp2048" => push_unique(&mut p.dh, DhGroup::Modp2048),
                "modp3072" => push_unique(&mut p.dh, DhGroup::Modp3072),
                "modp4096" => push_unique(&mut p.dh, DhGroup::Modp4096),
                "ecp256" => push_unique(&mut p.dh, DhGroup::Ecp256),
                "ecp384" => push_unique(&mut p.dh, DhGroup::Ecp384),
                "x25519" | "curve25519" => push_unique(&mut p.dh, DhGroup::Curve25519),
                "esn" | "noesn" if protocol == Protocol::Ike => {
                    return Err(format!("proposal {s:?}: {t} applies to ESP proposals only"));
                }
                "esn" => push_unique(&mut p.esn, true),
                "noesn" => push_unique(&mut p.esn, false),
                "modp768" => return Err(format!("proposal {s:?}: {}", refused(1))),
                "modp1024" => return Err(format!("proposal {s:?}: {}", refused(2))),
                "" => return Err(format!("proposal {s:?}: empty algorithm name")),
                _ => return Err(format!("proposal {s:?}: unknown or unsupported algorithm {:?}", tok.trim())),
            }
        }
        if p.encr.is_empty() {
            return Err(format!("proposal {s:?} has no encryption algorithm (e.g. aes128gcm16, aes256)"));
        }
        let aead = p.encr.iter().any(|e| e.is_aead());
        if aead && p.encr.iter().any(|e| !e.is_aead()) {
            return Err(format!(
                "proposal {s:?} mixes AEAD (aes*gcm16) and classic ciphers, which one proposal cannot: make two proposals"
            ));
        }
        if !aead && p.integ.is_empty() {
            return Err(format!("proposal {s:?}: {} needs an integrity algorithm (e.g. sha256)", p.encr_names()));
        }
        match protocol {
            Protocol::Ike => {
                if p.prf.is_empty() {
                    p.prf = p.integ.iter().map(|i| i.prf()).collect();
                    p.prf.dedup();
                }
                if p.prf.is_empty() {
                    return Err(format!("proposal {s:?}: an IKE proposal needs a PRF (add e.g. prfsha256)"));
                }
                if p.dh.is_empty() {
                    return Err(format!("proposal {s:?}: an IKE proposal needs a DH group (e.g. x25519, ecp256)"));
                }
            }
            Protocol::Esp => {
                // strongSwan drops them too: an IKE proposal pasted into
                // esp_proposals still works.
                p.prf.clear();
                if !aead && p.integ.contains(&Integ::HmacSha2_384_192) {
                    return Err(format!(
                        "proposal {s:?}: sha384 is not available for ESP (tern's ESP data plane has no HMAC-SHA-384): use sha256 or sha512"
                    ));
                }
                if p.esn.is_empty() {
                    p.esn.push(false);
                }
            }
        }
        if aead {
            p.integ.clear();
        }
        Ok(p)
    }

    fn encr_names(&self) -> String {
        self.encr.iter().map(|e| e.name()).collect::<Vec<_>>().join(", ")
    }

    /// The same proposal without DH groups: a child SA created in IKE_AUTH
    /// exchanges no KE, so both sides compare their ESP proposals without
    /// them there (RFC 7296 1.2; strongSwan does the same).
    pub fn without_dh(&self) -> Proposal {
        Proposal { dh: Vec::new(), ..self.clone() }
    }

    /// The proposal as an SA payload carries it: encryption, PRF (IKE),
    /// integrity, DH groups, ESN (ESP). For ESP, algorithms the ESP data
    /// plane lacks are left out.
    pub fn to_wire(&self, number: u8, protocol: Protocol, spi: Vec<u8>) -> WireProposal {
        let esp = protocol == Protocol::Esp;
        let mut transforms = Vec::new();
        for e in self.encr.iter().filter(|e| !esp || e.esp_cipher().is_some()) {
            let (id, key_len) = e.to_id();
            transforms.push((TRANSFORM_ENCR, id, key_len));
        }
        if !esp {
            transforms.extend(self.prf.iter().map(|p| (TRANSFORM_PRF, p.id(), None)));
        }
        transforms.extend(
            self.integ.iter().filter(|i| !esp || i.esp_integ().is_some()).map(|i| (TRANSFORM_INTEG, i.id(), None)),
        );
        transforms.extend(self.dh.iter().map(|g| (TRANSFORM_DH, g.id(), None)));
        if esp {
            if self.esn.is_empty() {
                transforms.push((TRANSFORM_ESN, 0, None));
            }
            transforms.extend(self.esn.iter().map(|&e| (TRANSFORM_ESN, u16::from(e), None)));
        }
        WireProposal { number, protocol, spi, transforms }
    }

    /// What this proposal accepts of a peer's proposal: for each transform
    /// type our first algorithm they offer. `None` if they offer a transform
    /// type tern does not know (RFC 7296 3.3.6) or lack one we need.
    fn accept(&self, theirs: &WireProposal, protocol: Protocol) -> Option<Chosen> {
        if theirs.protocol != protocol {
            return None;
        }
        let max_type = if protocol == Protocol::Esp { TRANSFORM_ESN } else { TRANSFORM_DH };
        if theirs.transforms.iter().any(|t| t.0 == 0 || t.0 > max_type) {
            return None;
        }
        let esp = protocol == Protocol::Esp;
        let offered = |ty: u8| theirs.transforms.iter().filter(move |t| t.0 == ty);
        let offers = |ty: u8, id: u16| offered(ty).any(|t| t.1 == id);
        let (encr, integ) = self.encr.iter().filter(|e| !esp || e.esp_cipher().is_some()).find_map(|&e| {
            if !offered(TRANSFORM_ENCR).any(|t| Encr::from_id(t.1, t.2) == Some(e)) {
                return None;
            }
            if e.is_aead() {
                // RFC 5282 8: no integrity transform, or only NONE.
                let ok = offered(TRANSFORM_INTEG).all(|t| t.1 == 0);
                ok.then_some((e, None))
            } else {
                let i =
                    self.integ.iter().find(|i| (!esp || i.esp_integ().is_some()) && offers(TRANSFORM_INTEG, i.id()))?;
                Some((e, Some(*i)))
            }
        })?;
        let prf = if esp { None } else { Some(*self.prf.iter().find(|p| offers(TRANSFORM_PRF, p.id()))?) };
        let dh = if self.dh.is_empty() {
            // No PFS here: they must not insist on a group.
            if esp && offered(TRANSFORM_DH).all(|t| t.1 == 0) {
                None
            } else {
                return None;
            }
        } else {
            Some(*self.dh.iter().find(|g| offers(TRANSFORM_DH, g.id()))?)
        };
        let esn = if esp {
            let ours: &[bool] = if self.esn.is_empty() { &[false] } else { &self.esn };
            let theirs_none = offered(TRANSFORM_ESN).next().is_none();
            *ours.iter().find(|&&e| offers(TRANSFORM_ESN, u16::from(e)) || (theirs_none && !e))?
        } else {
            false
        };
        Some(Chosen { encr, prf, integ, dh, esn })
    }
}

fn refused(group: u8) -> String {
    let name = if group == 1 { "modp768" } else { "modp1024" };
    format!("{name} (DH group {group}) is broken and refused: use x25519 or ecp256")
}

/// strongSwan's syntax, every algorithm listed (what [`Proposal::parse`]
/// reads back to the same proposal); `noesn` alone, the default, is left
/// out.
impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = self
            .encr
            .iter()
            .map(|e| e.name())
            .chain(self.integ.iter().map(|i| i.name()))
            .chain(self.prf.iter().map(|p| p.name()))
            .chain(self.dh.iter().map(|g| g.name()))
            .chain(self.esn.iter().map(|&e| if e { "esn" } else { "noesn" }).filter(|_| self.esn != [false]));
        f.write_str(&names.collect::<Vec<_>>().join("-"))
    }
}

impl Chosen {
    /// The responder's single-transform answer.
    pub fn to_wire(&self, number: u8, protocol: Protocol, spi: Vec<u8>) -> WireProposal {
        let (id, key_len) = self.encr.to_id();
        let mut transforms = vec![(TRANSFORM_ENCR, id, key_len)];
        transforms.extend(self.prf.map(|p| (TRANSFORM_PRF, p.id(), None)));
        transforms.extend(self.integ.map(|i| (TRANSFORM_INTEG, i.id(), None)));
        transforms.extend(self.dh.map(|g| (TRANSFORM_DH, g.id(), None)));
        if protocol == Protocol::Esp {
            transforms.push((TRANSFORM_ESN, u16::from(self.esn), None));
        }
        WireProposal { number, protocol, spi, transforms }
    }

    /// The responder's answer as the initiator reads it: exactly one
    /// transform of each type it needs (encryption; PRF and DH for IKE;
    /// integrity unless AEAD; ESN for ESP optional, absent meaning none), of
    /// algorithms tern knows. Whether we offered it is
    /// [`Chosen::offered_by`]'s question.
    pub fn from_wire(p: &WireProposal) -> Result<Chosen, String> {
        let esp = p.protocol == Protocol::Esp;
        let max_type = if esp { TRANSFORM_ESN } else { TRANSFORM_DH };
        if let Some(t) = p.transforms.iter().find(|t| t.0 == 0 || t.0 > max_type) {
            return Err(format!("the answer has a transform of type {} in a {:?} proposal", t.0, p.protocol));
        }
        let one = |ty: u8, what: &str| -> Result<Option<(u16, Option<u16>)>, String> {
            let mut it = p.transforms.iter().filter(|t| t.0 == ty);
            let first = it.next().map(|t| (t.1, t.2));
            if it.next().is_some() {
                return Err(format!("the answer has more than one {what} transform"));
            }
            Ok(first)
        };
        let (id, key_len) = one(TRANSFORM_ENCR, "encryption")?.ok_or("the answer has no encryption transform")?;
        let encr = Encr::from_id(id, key_len)
            .ok_or_else(|| format!("the answer's encryption {id} (key length {key_len:?}) is not one tern offers"))?;
        let prf = match one(TRANSFORM_PRF, "PRF")? {
            Some(_) if esp => return Err("the answer has a PRF in an ESP proposal".into()),
            Some((id, _)) => Some(Prf::from_id(id).ok_or_else(|| format!("the answer's PRF {id} is unknown"))?),
            None if esp => None,
            None => return Err("the answer has no PRF".into()),
        };
        let integ = match one(TRANSFORM_INTEG, "integrity")? {
            None | Some((0, _)) => None,
            Some((id, _)) => Some(Integ::from_id(id).ok_or_else(|| format!("the answer's integrity {id} is unknown"))?),
        };
        match (encr.is_aead(), integ) {
            (true, Some(i)) => return Err(format!("the answer pairs {} with integrity {}", encr.name(), i.name())),
            (false, None) => return Err(format!("the answer has {} without an integrity algorithm", encr.name())),
            _ => {}
        }
        let dh = match one(TRANSFORM_DH, "DH group")? {
            None | Some((0, _)) if esp => None,
            None | Some((0, _)) => return Err("the answer has no DH group".into()),
            Some((id, _)) => {
                Some(DhGroup::from_id(id).ok_or_else(|| format!("the answer's DH group {id} is unknown"))?)
            }
        };
        let esn = match one(TRANSFORM_ESN, "ESN")? {
            None | Some((0, _)) => false,
            Some((1, _)) => true,
            Some((id, _)) => return Err(format!("the answer's ESN transform {id} is unknown")),
        };
        Ok(Chosen { encr, prf, integ, dh, esn })
    }

    /// Whether one of `ours` offered this choice (the initiator's check of
    /// the answer).
    pub fn offered_by(&self, ours: &[Proposal]) -> bool {
        ours.iter().any(|p| {
            p.encr.contains(&self.encr)
                && match self.prf {
                    Some(x) => p.prf.contains(&x),
                    None => p.prf.is_empty(),
                }
                && match self.integ {
                    Some(i) => p.integ.contains(&i),
                    None => self.encr.is_aead(),
                }
                && match self.dh {
                    Some(g) => p.dh.contains(&g),
                    None => p.dh.is_empty(),
                }
                && (p.esn.contains(&self.esn) || (p.esn.is_empty() && !self.esn))
        })
    }
}

/// strongSwan's syntax: `aes128gcm16-prfsha256-x25519`,
/// `aes256-sha256-modp3072-esn` (encryption, integrity, PRF, DH, `esn`).
impl std::fmt::Display for Chosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.encr.name())?;
        if let Some(i) = self.integ {
            write!(f, "-{}", i.name())?;
        }
        if let Some(p) = self.prf {
            write!(f, "-{}", p.name())?;
        }
        if let Some(g) = self.dh {
            write!(f, "-{}", g.name())?;
        }
        if self.esn {
            f.write_str("-esn")?;
        }
        Ok(())
    }
}

/// Responder selection (RFC 7296 2.7): the first of THEIR proposals that
/// one of ours accepts (within it, our preferred algorithm of each type
/// that they offer). Returns their proposal number, the choice and their
/// SPI. Their proposals of another protocol are skipped.
pub fn select(ours: &[Proposal], theirs: &[WireProposal], protocol: Protocol) -> Option<(u8, Chosen, Vec<u8>)> {
    theirs.iter().find_map(|w| ours.iter().find_map(|p| p.accept(w, protocol)).map(|c| (w.number, c, w.spi.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ike(s: &str) -> Proposal {
        Proposal::parse(s, Protocol::Ike).unwrap()
    }

    fn esp(s: &str) -> Proposal {
        Proposal::parse(s, Protocol::Esp).unwrap()
    }

    #[test]
    fn every_token() {
        let p = ike(
            "aes128-aes256-sha1-sha256-sha384-sha512-prfsha1-prfsha256-prfsha384-prfsha512-modp2048-modp3072-modp4096-ecp256-ecp384-x25519",
        );
        assert_eq!(p.encr, vec![Encr::AesCbc { bits: 128 }, Encr::AesCbc { bits: 256 }]);
        assert_eq!(p.integ, Integ::ALL.to_vec());
        assert_eq!(p.prf, Prf::ALL.to_vec());
        assert_eq!(p.dh, DhGroup::ALL.to_vec());
        assert!(p.esn.is_empty());
        let p = ike("aes128gcm16-aes256gcm16-aes128gcm128-aes256gcm128-prfsha256-curve25519");
        assert_eq!(p.encr, vec![Encr::AesGcm16 { bits: 128 }, Encr::AesGcm16 { bits: 256 }]);
        assert_eq!(p.dh, vec![DhGroup::Curve25519]);
        assert!(p.integ.is_empty());
        let p = esp("AES256-SHA512-esn-noesn");
        assert_eq!(p.esn, vec![true, false]);
        assert_eq!(p.integ, vec![Integ::HmacSha2_512_256]);
        assert!(p.prf.is_empty() && p.dh.is_empty());
    }

    #[test]
    fn strongswan_rules() {
        // IKE: the PRF follows the integrity algorithms unless given.
        let p = ike("aes256-sha256-sha1-modp3072");
        assert_eq!(p.prf, vec![Prf::HmacSha2_256, Prf::HmacSha1]);
        assert_eq!(ike("aes256-sha256-prfsha512-ecp384").prf, vec![Prf::HmacSha2_512]);
        // IKE with AEAD: an integrity algorithm names the PRF and is dropped.
        let p = ike("aes128gcm16-sha384-x25519");
        assert_eq!((p.prf, p.integ), (vec![Prf::HmacSha2_384], vec![]));
        // ESP: noesn by default, AEAD drops integrity, a DH group is PFS.
        let p = esp("aes128gcm16-sha256-x25519");
        assert_eq!((p.integ.clone(), p.esn.clone(), p.dh.clone()), (vec![], vec![false], vec![DhGroup::Curve25519]));
        assert_eq!(esp("aes128-sha256").esn, vec![false]);
    }

    #[test]
    fn refusals() {
        let err = |s, proto| Proposal::parse(s, proto).unwrap_err();
        let e = err("aes128-sha256-modp1024", Protocol::Ike);
        assert!(e.contains("modp1024 (DH group 2) is broken and refused: use x25519 or ecp256"), "{e}");
        assert!(err("aes128-sha256-modp768", Protocol::Esp).contains("modp768 (DH group 1) is broken"));
        let e = err("aes128-sha256-3des-x25519", Protocol::Ike);
        assert!(e.contains("\"3des\""), "{e}");
        assert!(err("aes192-sha256-x25519", Protocol::Ike).contains("\"aes192\""));
        assert!(err("aes128--sha256-x25519", Protocol::Ike).contains("empty"));
        assert!(err("aes128gcm16-x25519", Protocol::Ike).contains("needs a PRF"));
        assert!(err("aes128-sha256", Protocol::Ike).contains("needs a DH group"));
        assert!(err("sha256-x25519", Protocol::Ike).contains("no encryption"));
        assert!(err("aes128-x25519", Protocol::Ike).contains("integrity"));
        assert!(err("aes128-prfsha256-x25519", Protocol::Ike).contains("integrity"));
        assert!(err("aes128-x25519", Protocol::Esp).contains("integrity"));
        assert!(err("aes128gcm16-aes128-sha256-x25519", Protocol::Ike).contains("two proposals"));
        assert!(err("aes128-sha256-x25519-esn", Protocol::Ike).contains("ESP proposals only"));
        // PRFs in ESP proposals are dropped, as strongSwan does.
        assert_eq!(esp("aes128gcm16-prfsha256-x25519"), esp("aes128gcm16-x25519"));
        assert!(err("aes256-sha384", Protocol::Esp).contains("no HMAC-SHA-384"));
        // AEAD makes sha384 moot for ESP.
        assert!(Proposal::parse("aes256gcm16-sha384", Protocol::Esp).is_ok());
        assert!(err("", Protocol::Esp).contains("empty"));
    }

    #[test]
    fn esp_mapping_and_lengths() {
        assert_eq!(Encr::AesGcm16 { bits: 128 }.esp_cipher(), Some(tern_ipsec::Cipher::Aes128Gcm));
        assert_eq!(Encr::AesGcm16 { bits: 256 }.esp_cipher(), Some(tern_ipsec::Cipher::Aes256Gcm));
        assert_eq!(Encr::AesCbc { bits: 128 }.esp_cipher(), Some(tern_ipsec::Cipher::Aes128Cbc));
        assert_eq!(Encr::AesCbc { bits: 256 }.esp_cipher(), Some(tern_ipsec::Cipher::Aes256Cbc));
        assert_eq!(Encr::AesCbc { bits: 192 }.esp_cipher(), None);
        assert_eq!(Integ::HmacSha1_96.esp_integ(), Some(tern_ipsec::Integ::HmacSha1_96));
        assert_eq!(Integ::HmacSha2_256_128.esp_integ(), Some(tern_ipsec::Integ::HmacSha256_128));
        assert_eq!(Integ::HmacSha2_384_192.esp_integ(), None);
        assert_eq!(Integ::HmacSha2_512_256.esp_integ(), Some(tern_ipsec::Integ::HmacSha512_256));
        assert_eq!(Encr::AesGcm16 { bits: 128 }.key_len(), 20);
        assert_eq!(Encr::AesGcm16 { bits: 256 }.key_len(), 36);
        assert_eq!(Encr::AesCbc { bits: 256 }.key_len(), 32);
        let lens: Vec<_> = Integ::ALL.iter().map(|i| (i.key_len(), i.icv_len())).collect();
        assert_eq!(lens, vec![(20, 12), (32, 16), (48, 24), (64, 32)]);
        // An ESP proposal built by hand with sha384 does not offer it.
        let p = Proposal { integ: vec![Integ::HmacSha2_384_192, Integ::HmacSha2_256_128], ..esp("aes128-sha256") };
        let w = p.to_wire(1, Protocol::Esp, vec![0, 0, 0, 1]);
        assert_eq!(w.transforms, vec![(1, 12, Some(128)), (3, 12, None), (5, 0, None)]);
        // ... and does not accept it.
        let theirs = Proposal { integ: vec![Integ::HmacSha2_384_192], ..p.clone() }.to_wire(1, Protocol::Ike, vec![]);
        let theirs = WireProposal { protocol: Protocol::Esp, ..theirs };
        assert_eq!(select(&[p], &[theirs], Protocol::Esp), None);
    }

    #[test]
    fn to_wire_transforms() {
        let w = ike("aes128gcm16-prfsha256-x25519-ecp256").to_wire(1, Protocol::Ike, vec![]);
        assert_eq!(w.transforms, vec![(1, 20, Some(128)), (2, 5, None), (4, 31, None), (4, 19, None)]);
        let w = esp("aes256-sha256-modp3072-esn").to_wire(2, Protocol::Esp, vec![1, 2, 3, 4]);
        assert_eq!((w.number, w.spi.clone()), (2, vec![1, 2, 3, 4]));
        assert_eq!(w.transforms, vec![(1, 12, Some(256)), (3, 12, None), (4, 15, None), (5, 1, None)]);
    }

    #[test]
    fn selection() {
        let ours = [ike("aes256gcm16-prfsha384-ecp384"), ike("aes128gcm16-prfsha256-x25519")];
        let theirs = [
            ike("aes128-sha256-modp2048").to_wire(1, Protocol::Ike, vec![]),
            ike("aes128gcm16-aes256gcm16-prfsha256-prfsha384-x25519-ecp384").to_wire(2, Protocol::Ike, vec![]),
            ike("aes256gcm16-prfsha384-ecp384").to_wire(3, Protocol::Ike, vec![]),
        ];
        // Their order of proposals wins; within one, our order of algorithms.
        let (n, c, spi) = select(&ours, &theirs, Protocol::Ike).unwrap();
        assert_eq!((n, spi), (2, vec![]));
        assert_eq!(c.to_string(), "aes256gcm16-prfsha384-ecp384");
        let (n, c, _) = select(&ours[1..], &theirs, Protocol::Ike).unwrap();
        assert_eq!((n, c.to_string().as_str()), (2, "aes128gcm16-prfsha256-x25519"));
        // Nothing in common.
        assert_eq!(select(&ours, &theirs[..1], Protocol::Ike), None);
        // A proposal of the other protocol is not considered.
        assert_eq!(select(&ours, &theirs, Protocol::Esp), None);
        // A transform type tern does not know makes their proposal unacceptable.
        let mut odd = theirs[2].clone();
        odd.transforms.push((6, 1, None));
        assert_eq!(select(&ours, &[odd], Protocol::Ike), None);
        // ESN: theirs esn only, ours noesn: none; ours both: esn.
        let their_esp = [esp("aes128gcm16-esn").to_wire(1, Protocol::Esp, vec![9, 9, 9, 9])];
        assert_eq!(select(&[esp("aes128gcm16")], &their_esp, Protocol::Esp), None);
        let (_, c, spi) = select(&[esp("aes128gcm16-noesn-esn")], &their_esp, Protocol::Esp).unwrap();
        assert_eq!((c.to_string().as_str(), spi), ("aes128gcm16-esn", vec![9, 9, 9, 9]));
        // PFS: ours wants a group, theirs has none (and the reverse).
        let no_pfs = [esp("aes128-sha256").to_wire(1, Protocol::Esp, vec![1, 1, 1, 1])];
        assert_eq!(select(&[esp("aes128-sha256-x25519")], &no_pfs, Protocol::Esp), None);
        let pfs = [esp("aes128-sha256-x25519").to_wire(1, Protocol::Esp, vec![1, 1, 1, 1])];
        assert_eq!(select(&[esp("aes128-sha256")], &pfs, Protocol::Esp), None);
        let (_, c, _) = select(&[esp("aes128-sha256-x25519").without_dh()], &no_pfs, Protocol::Esp).unwrap();
        assert_eq!(c.to_string(), "aes128-sha256");
        let (_, c, _) = select(&[esp("aes128-sha512-sha256-ecp256-x25519")], &pfs, Protocol::Esp).unwrap();
        assert_eq!(c.to_string(), "aes128-sha256-x25519");
        // AEAD with an integrity transform other than NONE is not accepted.
        let mut bad = esp("aes128gcm16").to_wire(1, Protocol::Esp, vec![1, 1, 1, 1]);
        bad.transforms.push((3, 12, None));
        assert_eq!(select(&[esp("aes128gcm16")], &[bad.clone()], Protocol::Esp), None);
        bad.transforms.pop();
        bad.transforms.push((3, 0, None));
        assert!(select(&[esp("aes128gcm16")], &[bad], Protocol::Esp).is_some());
        // The key length matters.
        let w = [ike("aes256-sha256-x25519").to_wire(1, Protocol::Ike, vec![])];
        assert_eq!(select(&[ike("aes128-sha256-x25519")], &w, Protocol::Ike), None);
    }

    #[test]
    fn answers() {
        let ours = [ike("aes128gcm16-prfsha256-x25519"), ike("aes256-sha256-modp3072")];
        let c = Chosen {
            encr: Encr::AesCbc { bits: 256 },
            prf: Some(Prf::HmacSha2_256),
            integ: Some(Integ::HmacSha2_256_128),
            dh: Some(DhGroup::Modp3072),
            esn: false,
        };
        let w = c.to_wire(2, Protocol::Ike, vec![]);
        assert_eq!(w.transforms, vec![(1, 12, Some(256)), (2, 5, None), (3, 12, None), (4, 15, None)]);
        assert_eq!(Chosen::from_wire(&w).unwrap(), c);
        assert!(c.offered_by(&ours));
        assert!(!Chosen { dh: Some(DhGroup::Curve25519), ..c }.offered_by(&ours));
        assert!(!Chosen { integ: None, ..c }.offered_by(&ours));
        assert_eq!(c.to_string(), "aes256-sha256-prfsha256-modp3072");

        // Two transforms of a type, a missing one, unknown ones.
        let mut two = w.clone();
        two.transforms.push((4, 31, None));
        assert!(Chosen::from_wire(&two).unwrap_err().contains("more than one DH group"));
        let mut none = w.clone();
        none.transforms.retain(|t| t.0 != 2);
        assert!(Chosen::from_wire(&none).unwrap_err().contains("no PRF"));
        let mut unknown = w.clone();
        unknown.transforms[3] = (4, 2, None);
        assert!(Chosen::from_wire(&unknown).unwrap_err().contains("DH group 2"));
        let mut esn_in_ike = w.clone();
        esn_in_ike.transforms.push((5, 0, None));
        assert!(Chosen::from_wire(&esn_in_ike).is_err());
        let mut gcm_integ = Chosen { encr: Encr::AesGcm16 { bits: 128 }, ..c }.to_wire(1, Protocol::Ike, vec![]);
        assert!(Chosen::from_wire(&gcm_integ).unwrap_err().contains("pairs"));
        gcm_integ.transforms.retain(|t| t.0 != 3);
        assert!(Chosen::from_wire(&gcm_integ).is_ok());

        // ESP: esn, no PFS.
        let e = Chosen { encr: Encr::AesGcm16 { bits: 256 }, prf: None, integ: None, dh: None, esn: true };
        let w = e.to_wire(1, Protocol::Esp, vec![1, 2, 3, 4]);
        assert_eq!(w.transforms, vec![(1, 20, Some(256)), (5, 1, None)]);
        assert_eq!(Chosen::from_wire(&w).unwrap(), e);
        assert_eq!(e.to_string(), "aes256gcm16-esn");
        assert!(e.offered_by(&[esp("aes256gcm16-esn")]));
        assert!(!e.offered_by(&[esp("aes256gcm16")]));
        assert!(!e.offered_by(&[esp("aes256gcm16-esn-x25519")]));
        let mut prf_in_esp = w.clone();
        prf_in_esp.transforms.push((2, 5, None));
        assert!(Chosen::from_wire(&prf_in_esp).is_err());
    }

    fn chosen_strategy() -> impl Strategy<Value = (Proposal, Protocol)> {
        let encr = prop_oneof![
            Just(Encr::AesCbc { bits: 128 }),
            Just(Encr::AesCbc { bits: 256 }),
            Just(Encr::AesGcm16 { bits: 128 }),
            Just(Encr::AesGcm16 { bits: 256 })
        ];
        let sub = |n: usize| proptest::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=n).prop_shuffle();
        (encr, sub(4), sub(4), sub(6), proptest::sample::subsequence(vec![false, true], 1..=2), any::<bool>()).prop_map(
            |(e, prf, integ, dh, esn, is_ike)| {
                let protocol = if is_ike { Protocol::Ike } else { Protocol::Esp };
                let mut p = Proposal {
                    encr: vec![e],
                    prf: prf.iter().map(|&i| Prf::ALL[i]).collect(),
                    integ: integ.iter().map(|&i| Integ::ALL[i]).collect(),
                    dh: dh.iter().map(|&i| DhGroup::ALL[i]).collect(),
                    esn,
                };
                if e.is_aead() {
                    p.integ.clear();
                }
                if !is_ike {
                    p.prf.clear();
                    p.integ.retain(|i| i.esp_integ().is_some());
                    if p.integ.is_empty() && !e.is_aead() {
                        p.integ.push(Integ::HmacSha2_256_128);
                    }
                } else {
                    p.esn.clear();
                }
                (p, protocol)
            },
        )
    }

    proptest! {
        /// A proposal shown and parsed back is itself; offered to a peer
        /// with the same configuration it is accepted, and the answer reads
        /// back as a choice the proposal offered.
        #[test]
        fn display_parse_select_answer((p, protocol) in chosen_strategy()) {
            prop_assert_eq!(&Proposal::parse(&p.to_string(), protocol).unwrap(), &p);
            let w = p.to_wire(7, protocol, vec![1, 2, 3, 4]);
            let (n, c, spi) = select(std::slice::from_ref(&p), &[w], protocol).unwrap();
            prop_assert_eq!((n, spi), (7, vec![1, 2, 3, 4]));
            prop_assert!(c.offered_by(std::slice::from_ref(&p)));
            prop_assert_eq!(Chosen::from_wire(&c.to_wire(7, protocol, vec![])).unwrap(), c);
            prop_assert_eq!(Proposal::parse(&c.to_string(), protocol).unwrap().to_string(), c.to_string());
            // Our first choice of each.
            prop_assert_eq!(Some(&c.encr), p.encr.first());
            prop_assert_eq!(c.dh.as_ref(), p.dh.first());
        }

        /// Proposal strings of random tokens: an error or a proposal, no panic.
        #[test]
        fn random_strings(s in "[a-z0-9-]{0,40}", ike in any::<bool>()) {
            let _ = Proposal::parse(&s, if ike { Protocol::Ike } else { Protocol::Esp });
        }
    }
}
