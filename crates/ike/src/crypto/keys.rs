//! Key material: the IKE SA's seven keys (RFC 7296 2.14, 2.18 for a
//! rekeyed IKE SA) and a child SA's (2.17).

use super::CryptoError;
use super::algs;
use super::prf::{prf, prf_len, prf_plus};
use super::sk::SkCipher;
use crate::output::EspKeys;
use crate::proposal::{Chosen, Prf};
use tern_ipsec::Key;
use zeroize::Zeroizing;

/// An IKE SA's keys after IKE_SA_INIT. Kept as bytes (boxed slices, not
/// vectors: a million SAs hold them): the SK ciphers expand theirs per
/// message (see `SkCipher`).
pub struct IkeKeys {
    pub prf: crate::proposal::Prf,
    /// SK_d: child SAs' keys derive from it.
    pub sk_d: Zeroizing<Box<[u8]>>,
    /// SK_pi | SK_pr (each PRF-length): the AUTH payload's MACed ID, in
    /// one allocation, emptied once the SA is authenticated
    /// (`IkeSa::forget_half_open`).
    pub sk_p: Zeroizing<Box<[u8]>>,
    /// Protects what the initiator sends (SK_ai + SK_ei) / the responder.
    pub initiator: SkCipher,
    pub responder: SkCipher,
}

/// The PRF and ciphers only: keys are never printed.
impl std::fmt::Debug for IkeKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IkeKeys")
            .field("prf", &self.prf)
            .field("initiator", &self.initiator)
            .field("responder", &self.responder)
            .finish_non_exhaustive()
    }
}

/// Takes consecutive slices off key material, refusing to run short.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CryptoError> {
        if n > self.rest.len() {
            return Err(CryptoError::Unsupported("more key material than prf+ yields"));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
}

fn concat(parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
    let mut v = Zeroizing::new(Vec::with_capacity(parts.iter().map(|p| p.len()).sum()));
    for p in parts {
        v.extend_from_slice(p);
    }
    v
}

impl IkeKeys {
    /// SK_pi (empty once the SA is authenticated).
    pub fn sk_pi(&self) -> &[u8] {
        self.sk_p.get(..self.sk_p.len() / 2).unwrap_or_default()
    }

    /// SK_pr (empty once the SA is authenticated).
    pub fn sk_pr(&self) -> &[u8] {
        self.sk_p.get(self.sk_p.len() / 2..).unwrap_or_default()
    }

    /// SKEYSEED = prf(Ni | Nr, g^ir) (2.14: the PRF key is Ni | Nr), then
    /// {SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr} =
    /// prf+(SKEYSEED, Ni | Nr | SPIi | SPIr).
    pub fn derive(
        chosen: &Chosen,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys, CryptoError> {
        let alg = ike_prf(chosen)?;
        let skeyseed = prf(alg, &concat(&[ni, nr]), shared);
        IkeKeys::from_skeyseed(chosen, &skeyseed, ni, nr, spi_i, spi_r)
    }

    /// A rekeyed IKE SA's keys (2.18): SKEYSEED = prf(SK_d (old),
    /// g^ir (new) | Ni | Nr) with the old IKE SA's PRF, then prf+ with the
    /// new one's, over the new nonces and SPIs.
    #[allow(clippy::too_many_arguments)]
    pub fn derive_rekey(
        old_sk_d: &[u8],
        old_prf: crate::proposal::Prf,
        chosen: &Chosen,
        shared: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys, CryptoError> {
        ike_prf(chosen)?;
        let skeyseed = skeyseed_rekey(old_prf, old_sk_d, shared, ni, nr);
        IkeKeys::from_skeyseed(chosen, &skeyseed, ni, nr, spi_i, spi_r)
    }

    fn from_skeyseed(
        chosen: &Chosen,
        skeyseed: &[u8],
        ni: &[u8],
        nr: &[u8],
        spi_i: u64,
        spi_r: u64,
    ) -> Result<IkeKeys, CryptoError> {
        let alg = ike_prf(chosen)?;
        algs::check_pair(chosen.encr, chosen.integ)?;
        let (p, a, e) = (prf_len(alg), chosen.integ.map_or(0, algs::integ_key_len), algs::encr_key_len(chosen.encr)?);
        let seed = concat(&[ni, nr, &spi_i.to_be_bytes(), &spi_r.to_be_bytes()]);
        let keymat = prf_plus(alg, skeyseed, &seed, 3 * p + 2 * a + 2 * e);
        let mut c = Cursor { rest: &keymat };
        let sk_d = Zeroizing::new(Box::from(c.take(p)?));
        let (sk_ai, sk_ar) = (c.take(a)?, c.take(a)?);
        let (sk_ei, sk_er) = (c.take(e)?, c.take(e)?);
        let sk_p = Zeroizing::new(Box::from(c.take(2 * p)?));
        Ok(IkeKeys {
            prf: alg,
            sk_d,
            sk_p,
            initiator: SkCipher::new(chosen.encr, chosen.integ, sk_ei, sk_ai)?,
            responder: SkCipher::new(chosen.encr, chosen.integ, sk_er, sk_ar)?,
        })
    }
}

fn ike_prf(chosen: &Chosen) -> Result<Prf, CryptoError> {
    chosen.prf.ok_or(CryptoError::Unsupported("an IKE proposal without a PRF"))
}

/// prf(SK_d (old), g^ir (new) | Ni | Nr).
fn skeyseed_rekey(old_prf: Prf, old_sk_d: &[u8], shared: &[u8], ni: &[u8], nr: &[u8]) -> Zeroizing<Vec<u8>> {
    prf(old_prf, old_sk_d, &concat(&[shared, ni, nr]))
}

/// A child SA's keys (2.17): KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr);
/// the initiator-to-responder SA's keys first (encryption then integrity),
/// then the other direction. Returns (initiator to responder, responder to
/// initiator), with the SPIs given (each SA's SPI is the one its receiver
/// chose). For AES-GCM the encryption key includes its 4-byte salt (RFC
/// 4106 8.1) and there is no integrity key.
#[allow(clippy::too_many_arguments)]
pub fn child_keys(
    prf: crate::proposal::Prf,
    sk_d: &[u8],
    chosen: &Chosen,
    pfs_shared: Option<&[u8]>,
    ni: &[u8],
    nr: &[u8],
    spi_i_to_r: u32,
    spi_r_to_i: u32,
) -> Result<(EspKeys, EspKeys), CryptoError> {
    algs::check_pair(chosen.encr, chosen.integ)?;
    let cipher = algs::esp_cipher(chosen.encr)?;
    let integ = algs::esp_integ(chosen.integ)?;
    let (e, a) = (cipher.key_len(), integ.key_len());
    let seed = concat(&[pfs_shared.unwrap_or_default(), ni, nr]);
    let keymat = prf_plus(prf, sk_d, &seed, 2 * (e + a));
    let mut c = Cursor { rest: &keymat };
    let mut one = |spi| -> Result<EspKeys, CryptoError> {
        let key = Key::new(c.take(e)?.to_vec());
        let integ_key = Key::new(c.take(a)?.to_vec());
        Ok(EspKeys { spi, cipher, integ, key, integ_key })
    };
    let i_to_r = one(spi_i_to_r)?;
    let r_to_i = one(spi_r_to_i)?;
    Ok((i_to_r, r_to_i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::unhex;
    use crate::proposal::{DhGroup, Encr, Integ};

    fn chosen(encr: Encr, prf: Option<Prf>, integ: Option<Integ>) -> Chosen {
        Chosen { encr, prf, integ, dh: Some(DhGroup::Curve25519), esn: false }
    }

    /// One of NIST CAVP's IKEv2 KDF samples (SP 800-135), as NSS's gtests
    /// carry them (ike-sha{1,256,384}-vectors.h, tests 6, 7 and 8):
    /// SKEYSEED = prf(Ni | Nr, g^ir); DKM = prf+(SKEYSEED, Ni | Nr | SPIi |
    /// SPIr), 132 bytes; the rekey's SKEYSEED = prf(SK_d, g^ir (new) | Ni |
    /// Nr) with SK_d the DKM's first PRF-length bytes.
    struct Cavp {
        prf: Prf,
        g_ir: &'static str,
        ni: &'static str,
        nr: &'static str,
        skeyseed: &'static str,
        spi_i: u64,
        spi_r: u64,
        dkm: &'static str,
        g_ir_new: &'static str,
        skeyseed_rekey: &'static str,
        /// An IKE proposal with this PRF, to split the DKM into keys.
        chosen: Chosen,
    }

    fn cavp() -> [Cavp; 3] {
        [
            Cavp {
                prf: Prf::HmacSha1,
                g_ir: "4b2c1f971981a8ad8d0abeafabf38cf75fc8349c148142465ed9c8b516b8be52",
                ni: "32b50d5f4a3763f3",
                nr: "9206a04b26564cb1",
                skeyseed: "a9a7b222b59f8f48645f28a1db5b5f5d7479cba7",
                spi_i: 0x34c9e7c188868785,
                spi_r: 0x3ff77d760d2b2199,
                dkm: "a14293677cc80ff8f9cc0eee30d895da9d8f405666e30ef0dfcb63c634a46002a2a63080e\
                      514a062768b76606f9fa5e992204fc5a670bde3f10d6b027113936a5c55b648a194ae587b\
                      0088d52204b702c979fa280870d2ed41efa9c549fd11198af1670b143d384bd275c5f594c\
                      f266b05ebadca855e4249520a441a81157435a7a56cc4",
                g_ir_new: "863f3c9d06efd39d2b907b97f8699e5dd5251ef64a2a176f36ee40c87d4f9330",
                skeyseed_rekey: "63e81194946ebd05df7df5ebf5d8750056bf1f1d",
                // 20 + 2 x 20 + 2 x 16 + 2 x 20 = 132: the whole DKM.
                chosen: chosen(Encr::AesCbc { bits: 128 }, Some(Prf::HmacSha1), Some(Integ::HmacSha1_96)),
            },
            Cavp {
                prf: Prf::HmacSha2_256,
                g_ir: "0f4d257d7a58fc4545c7d7a88119eee5d5c9690c5b4c989171d3abbfd99d1d29",
                ni: "3f302be1abcb28e1",
                nr: "8c332ee006064c9b",
                skeyseed: "5f00d1bd2c58ec224b1e6b71fa0f19a1faa7a193952c444411b47c1a9d8ba6fe",
                spi_i: 0x40dac39e1e1a8640,
                spi_r: 0x8619a1cf9a6e4c07,
                dkm: "0b137d669b0947d7d026d593f0305ad401ff0c471357d695778a9c7f4b4869ece98aca531\
                      188d16041b3bb936d2dbb3b4993a6e768a809160de45d0283f273a6cdf6854379e31be72b\
                      8d3d1fa990cf9c5b015ca9f918a7df6253c958114a09d4e1c19bdcd4db14b29d98db1a74a\
                      d405c588662c14a04d0d36aa4ab55e90f8986d12d4aad",
                g_ir_new: "25f3b12d6f282739256e39bf54eda53b60ffcf379bb7bcc90c27b4c4c578616c",
                skeyseed_rekey: "2d63f6debc92048b4fef3889c4c99ca67d6496e0fac14a2bca9a2d6566ff2398",
                // 32 + 2 x 20 (with salts) + 32 + 32: all but SK_pr's last 4.
                chosen: chosen(Encr::AesGcm16 { bits: 128 }, Some(Prf::HmacSha2_256), None),
            },
            Cavp {
                prf: Prf::HmacSha2_384,
                g_ir: "d3288cd87565101e88fe3bad918f31939d8dd26ff1071f8b2d7f447524e58d7c",
                ni: "fd1b572a8e735591",
                nr: "6013b0ef88dacd3d",
                skeyseed: "69fe7a1ac94adaeb711295f5fe004b1a8d6a0b65d05692758ce8ad2f7a45f59d\
                           7d0b596f51f7dfcf3330061888f6a94f",
                spi_i: 0x2116ad07ce61f749,
                spi_r: 0x24880e55f11a65b7,
                dkm: "4f904c2025c90c817ea5ff9b662a6fdb445a73b57cdf09eacd379b95e1f03cacb04cd6dee\
                      da4f952191dd9bc1f7a9502471a648d74dc06d38112de48a42501f6b1a3ad55c2099cd9a6\
                      48e5f17e5bf3e34bf9b5953decb768a34f875fe2b78dca0c2fcca81ec1a412006dfaed38f\
                      a06882e61f4c148105fb8e231fdb33c4d484c001721d4",
                g_ir_new: "3358f620539473aee8d07e779764c4c6a9aabddc79a28e136b3bac021dbde44a",
                skeyseed_rekey: "e0548c1682e13bce454026b3b1bdf42985b24e4e7408095a7c529de38c3d1fcb\
                                 04c9fe6868042a34c9614c6c99e3fcea",
                // 48 + 2 x 48 + ...: SK_d, SK_ai and most of SK_ar.
                chosen: chosen(Encr::AesCbc { bits: 256 }, Some(Prf::HmacSha2_384), Some(Integ::HmacSha2_384_192)),
            },
        ]
    }

    /// SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr, as derived.
    fn all_keys(k: &IkeKeys) -> Vec<u8> {
        let (ei, ai) = k.initiator.keys();
        let (er, ar) = k.responder.keys();
        [&k.sk_d[..], ai, ar, ei, er, k.sk_pi(), k.sk_pr()].concat()
    }

    #[test]
    fn nist_cavp_ikev2() {
        for v in cavp() {
            let (ni, nr, dkm) = (unhex(v.ni), unhex(v.nr), unhex(v.dkm));
            assert_eq!(dkm.len(), 132);
            assert_eq!(*prf(v.prf, &concat(&[&ni, &nr]), &unhex(v.g_ir)), unhex(v.skeyseed), "{:?}", v.prf);
            let k = IkeKeys::derive(&v.chosen, &unhex(v.g_ir), &ni, &nr, v.spi_i, v.spi_r).expect("derive");
            assert_eq!(k.prf, v.prf);
            let keys = all_keys(&k);
            let n = keys.len().min(dkm.len());
            assert_eq!(keys[..n], dkm[..n], "{:?}", v.prf);
            // The rekey: SKEYSEED from the sample's SK_d and new g^ir.
            let p = prf_len(v.prf);
            let sk_d = &dkm[..p];
            let seed = skeyseed_rekey(v.prf, sk_d, &unhex(v.g_ir_new), &ni, &nr);
            assert_eq!(*seed, unhex(v.skeyseed_rekey), "{:?}", v.prf);
            let r = IkeKeys::derive_rekey(sk_d, v.prf, &v.chosen, &unhex(v.g_ir_new), &ni, &nr, v.spi_i, v.spi_r)
                .expect("rekey");
            let spis = concat(&[&ni, &nr, &v.spi_i.to_be_bytes(), &v.spi_r.to_be_bytes()]);
            let km = prf_plus(v.prf, &seed, &spis, all_keys(&r).len());
            assert_eq!(all_keys(&r), *km);
        }
        // Keys never show in Debug.
        let v = &cavp()[1];
        let k =
            IkeKeys::derive(&v.chosen, &unhex(v.g_ir), &unhex(v.ni), &unhex(v.nr), v.spi_i, v.spi_r).expect("derive");
        let shown = format!("{k:?}");
        assert!(!shown.contains("11, 19") && !shown.contains("0b13"), "{shown}");
        assert!(shown.contains("AesGcm16"), "{shown}");
    }

    #[test]
    fn ike_key_order_and_lengths_with_integrity() {
        let (ni, nr) = (b"nonce-i-nonce-i!", b"nonce-r-nonce-r!");
        for (prf_alg, integ, bits) in [
            (Prf::HmacSha1, Integ::HmacSha1_96, 128u16),
            (Prf::HmacSha2_256, Integ::HmacSha2_256_128, 256),
            (Prf::HmacSha2_384, Integ::HmacSha2_384_192, 192),
            (Prf::HmacSha2_512, Integ::HmacSha2_512_256, 256),
        ] {
            let c = chosen(Encr::AesCbc { bits }, Some(prf_alg), Some(integ));
            let k = IkeKeys::derive(&c, b"g^ir", ni, nr, 1, 2).expect("derive");
            let seed = prf(prf_alg, &concat(&[ni, nr]), b"g^ir");
            let mut spis = concat(&[ni, nr]).to_vec();
            spis.extend_from_slice(&1u64.to_be_bytes());
            spis.extend_from_slice(&2u64.to_be_bytes());
            let (p, a, e) = (prf_len(prf_alg), algs::integ_key_len(integ), usize::from(bits) / 8);
            let km = prf_plus(prf_alg, &seed, &spis, 3 * p + 2 * a + 2 * e);
            let mut o = 0;
            let mut next = |n: usize| {
                o += n;
                km[o - n..o].to_vec()
            };
            assert_eq!(k.sk_d[..], next(p)[..]);
            let (ai, ar, ei, er) = (next(a), next(a), next(e), next(e));
            assert_eq!(k.initiator.keys(), (&ei[..], &ai[..]));
            assert_eq!(k.responder.keys(), (&er[..], &ar[..]));
            assert_eq!(k.sk_pi(), &next(p)[..]);
            assert_eq!(k.sk_pr(), &next(p)[..]);
            // Both sides derive the same: what one seals the other opens.
            let mut body = Vec::new();
            k.initiator.seal(b"hdr", b"payloads", &mut body).expect("seal");
            let k2 = IkeKeys::derive(&c, b"g^ir", ni, nr, 1, 2).expect("derive");
            assert_eq!(k2.initiator.open(b"hdr", &body).expect("open"), b"payloads");
            assert!(k2.responder.open(b"hdr", &body).is_err());
        }
    }

    #[test]
    fn rekey_uses_old_prf_for_skeyseed_and_new_for_prf_plus() {
        let old_sk_d = [7u8; 20];
        let c = chosen(Encr::AesGcm16 { bits: 256 }, Some(Prf::HmacSha2_512), None);
        let k = IkeKeys::derive_rekey(&old_sk_d, Prf::HmacSha1, &c, b"new g^ir", b"ni", b"nr", 3, 4).expect("rekey");
        let seed = prf(Prf::HmacSha1, &old_sk_d, b"new g^irninr");
        assert_eq!(seed.len(), 20);
        let mut s = b"ninr".to_vec();
        s.extend_from_slice(&3u64.to_be_bytes());
        s.extend_from_slice(&4u64.to_be_bytes());
        let km = prf_plus(Prf::HmacSha2_512, &seed, &s, 64);
        assert_eq!(k.prf, Prf::HmacSha2_512);
        assert_eq!(k.sk_d[..], km[..]);
        // Not the same as a fresh IKE SA's from the same values.
        let fresh = IkeKeys::derive(&c, b"new g^ir", b"ni", b"nr", 3, 4).expect("derive");
        assert_ne!(*fresh.sk_d, *k.sk_d);
    }

    /// The engine moves IKE SAs between threads (shards) and may share
    /// ciphers: everything here is Send and Sync.
    #[test]
    fn keys_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<IkeKeys>();
        check::<SkCipher>();
        check::<crate::crypto::DhPrivate>();
    }

    #[test]
    fn unusable_proposals_are_errors() {
        let no_prf = chosen(Encr::AesGcm16 { bits: 128 }, None, None);
        assert!(matches!(IkeKeys::derive(&no_prf, b"s", b"n", b"n", 1, 2), Err(CryptoError::Unsupported(_))));
        assert!(IkeKeys::derive_rekey(b"d", Prf::HmacSha1, &no_prf, b"s", b"n", b"n", 1, 2).is_err());
        let cbc_no_integ = chosen(Encr::AesCbc { bits: 128 }, Some(Prf::HmacSha1), None);
        assert!(IkeKeys::derive(&cbc_no_integ, b"s", b"n", b"n", 1, 2).is_err());
        assert!(child_keys(Prf::HmacSha1, b"d", &cbc_no_integ, None, b"n", b"n", 1, 2).is_err());
        let esp384 = chosen(Encr::AesCbc { bits: 128 }, None, Some(Integ::HmacSha2_384_192));
        assert!(matches!(
            child_keys(Prf::HmacSha1, b"d", &esp384, None, b"n", b"n", 1, 2),
            Err(CryptoError::Unsupported(_))
        ));
        let esp192 = chosen(Encr::AesCbc { bits: 192 }, None, Some(Integ::HmacSha1_96));
        assert!(child_keys(Prf::HmacSha1, b"d", &esp192, None, b"n", b"n", 1, 2).is_err());
    }

    #[test]
    fn child_keymat_order_and_lengths() {
        let sk_d = [3u8; 32];
        let (ni, nr) = (&[1u8; 32][..], &[2u8; 32][..]);
        for (encr, integ, e, a) in [
            (Encr::AesGcm16 { bits: 128 }, None, 20, 0),
            (Encr::AesGcm16 { bits: 256 }, None, 36, 0),
            (Encr::AesCbc { bits: 128 }, Some(Integ::HmacSha1_96), 16, 20),
            (Encr::AesCbc { bits: 256 }, Some(Integ::HmacSha2_256_128), 32, 32),
            (Encr::AesCbc { bits: 256 }, Some(Integ::HmacSha2_512_256), 32, 64),
        ] {
            let c = chosen(encr, None, integ);
            for pfs in [None, Some(&b"pfs g^ir"[..])] {
                let (i2r, r2i) =
                    child_keys(Prf::HmacSha2_256, &sk_d, &c, pfs, ni, nr, 0x1111, 0x2222).expect("child keys");
                let seed = concat(&[pfs.unwrap_or_default(), ni, nr]);
                let km = prf_plus(Prf::HmacSha2_256, &sk_d, &seed, 2 * (e + a));
                assert_eq!(i2r.spi, 0x1111);
                assert_eq!(r2i.spi, 0x2222);
                assert_eq!(i2r.key.as_bytes(), &km[..e]);
                assert_eq!(i2r.integ_key.as_bytes(), &km[e..e + a]);
                assert_eq!(r2i.key.as_bytes(), &km[e + a..2 * e + a]);
                assert_eq!(r2i.integ_key.as_bytes(), &km[2 * e + a..]);
                assert_eq!(i2r.cipher, algs::esp_cipher(encr).expect("cipher"));
                assert_eq!(i2r.integ, algs::esp_integ(integ).expect("integ"));
                assert_eq!(i2r.cipher.key_len(), e);
                assert_eq!(i2r.integ.key_len(), a);
                assert_ne!(i2r.key, r2i.key);
                // Each direction is a usable data-plane SA configuration.
                assert_eq!(i2r.key.len(), e);
            }
            let (no_pfs, _) = child_keys(Prf::HmacSha2_256, &sk_d, &c, None, ni, nr, 1, 2).expect("keys");
            let (pfs, _) = child_keys(Prf::HmacSha2_256, &sk_d, &c, Some(b"x"), ni, nr, 1, 2).expect("keys");
            assert_ne!(no_pfs.key, pfs.key);
        }
    }
}
