//! The PRFs (HMAC-SHA1/SHA2) and `prf+` (RFC 7296 2.13).

use crate::proposal::Prf;
use hmac::{Hmac, Mac};
use zeroize::Zeroizing;

/// HMAC over the concatenation of `parts`, keyed with `key`, into a fresh
/// zeroizing buffer. HMAC takes a key of any length (RFC 2104: a longer
/// key than the block is hashed first), so this never fails.
pub(crate) fn hmac_parts(alg: Prf, key: &[u8], parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
    fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
        // `KeyInit::new_from_slice` for HMAC accepts every length.
        let Ok(mut m) = <M as hmac::digest::KeyInit>::new_from_slice(key) else {
            return Zeroizing::new(Vec::new());
        };
        for p in parts {
            m.update(p);
        }
        Zeroizing::new(m.finalize().into_bytes().to_vec())
    }
    match alg {
        Prf::HmacSha1 => run::<Hmac<sha1::Sha1>>(key, parts),
        Prf::HmacSha2_256 => run::<Hmac<sha2::Sha256>>(key, parts),
        Prf::HmacSha2_384 => run::<Hmac<sha2::Sha384>>(key, parts),
        Prf::HmacSha2_512 => run::<Hmac<sha2::Sha512>>(key, parts),
    }
}

/// prf(key, data).
pub fn prf(alg: Prf, key: &[u8], data: &[u8]) -> Zeroizing<Vec<u8>> {
    hmac_parts(alg, key, &[data])
}

/// The most `prf+` yields: 255 blocks (the counter is one octet).
pub fn prf_plus_max(alg: Prf) -> usize {
    255 * prf_len(alg)
}

/// prf+(key, seed) truncated to `len` bytes (T1 | T2 | ...; at most 255
/// blocks). T1 = prf(K, S | 0x01), Tn = prf(K, Tn-1 | S | n). A `len`
/// beyond [`prf_plus_max`] is cut to it (RFC 7296 2.13 defines no more;
/// tern never asks for more than a few hundred bytes). The key is set up
/// once (HMAC's inner and outer pads hashed) and the keyed state copied
/// for each block, not keyed again per block.
pub fn prf_plus(alg: Prf, key: &[u8], seed: &[u8], len: usize) -> Zeroizing<Vec<u8>> {
    fn run<M: Mac + hmac::digest::KeyInit + Clone>(key: &[u8], seed: &[u8], len: usize, out: &mut Vec<u8>) {
        // `KeyInit::new_from_slice` for HMAC accepts every length.
        let Ok(keyed) = <M as hmac::digest::KeyInit>::new_from_slice(key) else {
            return;
        };
        let mut last = 0..0;
        let mut n: u8 = 1;
        while out.len() < len {
            let mut m = keyed.clone();
            m.update(out.get(last.clone()).unwrap_or_default());
            m.update(seed);
            m.update(&[n]);
            let start = out.len();
            out.extend_from_slice(&m.finalize().into_bytes());
            last = start..out.len();
            n = n.wrapping_add(1);
        }
    }
    let len = len.min(prf_plus_max(alg));
    let mut out = Zeroizing::new(Vec::with_capacity(len + prf_len(alg)));
    match alg {
        Prf::HmacSha1 => run::<Hmac<sha1::Sha1>>(key, seed, len, &mut out),
        Prf::HmacSha2_256 => run::<Hmac<sha2::Sha256>>(key, seed, len, &mut out),
        Prf::HmacSha2_384 => run::<Hmac<sha2::Sha384>>(key, seed, len, &mut out),
        Prf::HmacSha2_512 => run::<Hmac<sha2::Sha512>>(key, seed, len, &mut out),
    }
    out.truncate(len);
    out
}

/// The PRF's output (and preferred key) length in bytes.
pub fn prf_len(alg: Prf) -> usize {
    match alg {
        Prf::HmacSha1 => 20,
        Prf::HmacSha2_256 => 32,
        Prf::HmacSha2_384 => 48,
        Prf::HmacSha2_512 => 64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::unhex;

    const ALL: [Prf; 4] = [Prf::HmacSha1, Prf::HmacSha2_256, Prf::HmacSha2_384, Prf::HmacSha2_512];

    /// RFC 4231 test cases 1, 2 and 6 (a key longer than the block) for
    /// SHA-256/384/512, and RFC 2202's for SHA-1 (same keys and data).
    #[test]
    fn hmac_vectors() {
        let cases: [(&[u8], &[u8], [&str; 4]); 3] = [
            (
                &[0x0b; 20],
                b"Hi There",
                [
                    "b617318655057264e28bc0b6fb378c8ef146be00",
                    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
                    "afd03944d84895626b0825f4ab46907f15f9dadbe4101ec682aa034c7cebc59cfaea9ea9076ede7f4af152e8b2fa9cb6",
                    "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cdedaa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854",
                ],
            ),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                [
                    "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79",
                    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
                    "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649",
                    "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
                ],
            ),
            (
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                [
                    "90d0dace1c1bdc957339307803160335bde6df2b",
                    "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
                    "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c60c2ef6ab4030fe8296248df163f44952",
                    "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598",
                ],
            ),
        ];
        for (key, data, want) in cases {
            for (alg, want) in ALL.into_iter().zip(want) {
                let got = prf(alg, key, data);
                assert_eq!(got.len(), prf_len(alg));
                assert_eq!(*got, unhex(want), "{alg:?} key {key:02x?}");
            }
        }
    }

    /// prf+ against values computed independently, once, with Python's
    /// hmac module (/usr/bin/python3):
    ///
    /// ```text
    /// def prfplus(h, k, s, n):
    ///     out = b""; t = b""; i = 1
    ///     while len(out) < n:
    ///         t = hmac.new(k, t + s + bytes([i]), h).digest(); out += t; i += 1
    ///     return out[:n]
    /// prfplus("sha256", bytes(range(32)), b"tern prf+ seed", 200).hex()
    /// prfplus("sha1", bytes(range(20)), b"tern prf+ seed", 50).hex()
    /// prfplus("sha512", bytes(range(64)), b"tern prf+ seed", 150).hex()
    /// ```
    #[test]
    fn prf_plus_matches_python() {
        let seed = b"tern prf+ seed";
        let key: Vec<u8> = (0..64).collect();
        let got = prf_plus(Prf::HmacSha2_256, &key[..32], seed, 200);
        assert_eq!(
            *got,
            unhex(
                "b64d601235e8477ab9232a919a17e0dff48e9fd0c5a5522874506d0fbe8e26f267d81f851fa8dfef433ed6743b0d190e\
                 74158f00754e55ee961f15fc2588150ac277b2b5b79897c105c6ddb709a32c9bb31764b0c9d6bfc6c08b06cf218f98f9\
                 264282798978404f50d281f9c72cfef7e8e2f0d5baa31fba183f2125c0474f146debec156ae3ca542dc95ec1fd0845b6\
                 d8f7648c79e072d0f5b894bc142a90f760a55965ef9b983a7c8da9d84f2266678b4310b3d1d894356fbe2fa5aa939d6b\
                 9320becc6cf25b41"
            )
        );
        let got = prf_plus(Prf::HmacSha1, &key[..20], seed, 50);
        assert_eq!(
            *got,
            unhex(
                "aba909d82c39cac00cfa17d33fa9a71c4f5376a6e4f0354f7dfaa8141af449abe56fe13a5e66fdc5fff5a41579afd23e03b6"
            )
        );
        let got = prf_plus(Prf::HmacSha2_512, &key, seed, 150);
        assert_eq!(
            *got,
            unhex(
                "019022b57a9bb519546769928eed66b5e289adce325fc2263f9bfc6c1fc0d9e6db44f7283d84459b35bf1ac8545766d7\
                 bde2788b98800afd4f7fc8ff3c63c8c5b4b0cdf86662dd2833526e54c17071e2042f7ac14477ebcefbcefc66d2dbbce2\
                 c351872d5a8467f50ddfbe8b179ade02a70d6069d3dbcd85cda5ff94e9b09cae8e5f027bf78a3dbd9414597ab63cebb9\
                 ad160571a418"
            )
        );
    }

    #[test]
    fn prf_plus_prefixes_and_limit() {
        for alg in ALL {
            let long = prf_plus(alg, b"k", b"seed", 300);
            for len in [0, 1, prf_len(alg) - 1, prf_len(alg), prf_len(alg) + 1, 299] {
                let short = prf_plus(alg, b"k", b"seed", len);
                assert_eq!(short.len(), len);
                assert_eq!(&short[..], &long[..len]);
            }
            // T1 is prf(K, S | 0x01).
            assert_eq!(&long[..prf_len(alg)], &prf(alg, b"k", b"seed\x01")[..]);
            // 255 blocks at most: the counter octet never wraps.
            let all = prf_plus(alg, b"k", b"s", usize::MAX);
            assert_eq!(all.len(), prf_plus_max(alg));
            assert_eq!(&all[..300], &prf_plus(alg, b"k", b"s", 300)[..]);
        }
    }
}
