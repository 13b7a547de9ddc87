//! Known answers through the ESP code: the GCM ESP packets of
//! draft-mcgrew-gcm-test-01 (the test cases for RFC 4106), RFC 3602's
//! AES-CBC ESP packets (cases 5-8), RFC 2404's HMAC-SHA-1-96 and RFC
//! 4868's HMAC-SHA-256-128 / HMAC-SHA-512-256 vectors.

use std::time::Instant;
use tern_ipsec::*;

fn hex(s: &str) -> Vec<u8> {
    Key::from_hex(s).expect("hex").as_bytes().to_vec()
}

fn sa(cipher: Cipher, integ: Integ, key: Vec<u8>, integ_key: Vec<u8>, spi: u32, esn: bool) -> Sa {
    let cfg = SaConfig {
        id: 1,
        spi,
        cipher,
        integ,
        key: Key::new(key),
        integ_key: Key::new(integ_key),
        esn,
        replay_window: 0,
        udp_encap: None,
        soft: Lifetime::default(),
        hard: Lifetime::default(),
    };
    Sa::new(cfg, 1, Instant::now()).expect("sa")
}

/// (key, salt, spi, 64-bit sequence number, ESN form of the AAD, IV,
/// ciphertext + tag, plaintext with its ESP trailer).
type GcmCase = (&'static str, &'static str, u32, u64, bool, &'static str, &'static str, &'static str);

const GCM: [GcmCase; 4] = [
    (
        "4c80cdefbb5d10da906ac73c3613a634",
        "2e443b68",
        0x4321,
        0x8765_4321_0000_0000,
        true,
        "4956ed7e3b244cfe",
        "fecf537e729d5b07dc30df528dd22b768d1b98736696a6fd348509fa13ceac34cfa2436f14a3f3cf65925bf1f4a13c5d15b21e1884f5ff6247aeabb786b93bce61bc17d768fd9732459018148f6cbe722fd04796562dfdb4",
        "45000048699a000080114db7c0a80102c0a801010a9bf15638d301000001000000000000045f736970045f756470037369700963796265726369747902646b000021000101020201",
    ),
    (
        "3de09874b388e6491988d0c3607eae1f",
        "57690e43",
        0x42f6_7e3f,
        0x1010_1010_1010_1010,
        true,
        "4e280000a2fca1a3",
        "fba2caa4853cf9f0f22cb10d86dd83b0fec75691cf1a04b00d1138ec9c35791765acbd8701ad79845bf9fe3fba487bc91755e6662b4c8d0d1f5e22739530320ae0d731cc978ecafaeae88f00e80d6e48",
        "4500003c99c300008001cb7c40679318010101010800085c020043006162636465666768696a6b6c6d6e6f707172737475767761626364656667686901020201",
    ),
    (
        "abbccddef00112233445566778899aababbccddef00112233445566778899aab",
        "73616c74",
        0x1740_5e67,
        0x156f_3126_dd0d_b99b,
        true,
        "616e640169766563",
        "f2d69ecdbd5a0d5b8d5ef38bad4da58d1f278fde98ef67549d524a3018d9a57ff4d3a31ce673119e451626c2415771e3b7eebca614c89b35",
        "45080028732c00004006e9f90a0106120a01038f06b88023dd6bafbecb71260250101f646d540001",
    ),
    (
        "6c6567616c697a656d6172696a75616e61616e64646f69746265666f72656961",
        "7475726e",
        0x796b_6963,
        0xffff_ffff_ffff_ffff,
        true,
        "333021696765746d",
        "f97ab2aa356d8edce17644ac8c78e25dd24dedbb29ebf1b64a274b39b49c3a864cd3d78ca4ae68a32b42458fb57dbe821dcc63b9d0937ba2945f669368661a329fb4c053",
        "45000030da3a00008001df3bc0a80005c0a800010800c6cd020007006162636465666768696a6b6c6d6e6f707172737401020201",
    ),
];

#[test]
fn gcm_esp_packets_of_the_rfc_4106_test_cases_decrypt() {
    for (i, &(key, salt, spi, seq, esn, iv, ct, plain)) in GCM.iter().enumerate() {
        let cipher = if key.len() == 32 { Cipher::Aes128Gcm } else { Cipher::Aes256Gcm };
        let s = sa(cipher, Integ::None, [hex(key), hex(salt)].concat(), vec![], spi, esn);
        let mut esp = [spi.to_be_bytes().to_vec(), (seq as u32).to_be_bytes().to_vec(), hex(iv), hex(ct)].concat();
        assert_eq!(parse_header(&esp), Ok((spi, seq as u32)));
        let d = s.decrypt(&mut esp, seq).unwrap_or_else(|e| panic!("case {i}: {e}"));
        let p = hex(plain);
        let pad = usize::from(p[p.len() - 2]);
        assert_eq!(&esp[d.inner.clone()], &p[..p.len() - 2 - pad], "case {i}");
        assert_eq!(d.next_header, p[p.len() - 1], "case {i}");
        // One bit off anywhere, or the wrong high bits: the tag fails.
        let mut bad = [spi.to_be_bytes().to_vec(), (seq as u32).to_be_bytes().to_vec(), hex(iv), hex(ct)].concat();
        let n = bad.len();
        bad[n / 2] ^= 4;
        assert_eq!(s.decrypt(&mut bad, seq), Err(EspError::Integrity), "case {i}");
    }
}

/// RFC 3602 section 4, cases 5-8: AES-128-CBC ESP packets (SPI, sequence
/// number, IV, ciphertext; the RFC's are without ICV, so an HMAC-SHA-1-96
/// ICV, itself checked against RFC 2404 below, is appended).
#[test]
fn cbc_esp_packets_of_rfc_3602_decrypt() {
    let cases = [
        (
            "90d382b410eeba7ad938c46cec1a82bf",
            "0000432100000001e96e8c08ab465763fd098d45dd3ff893f663c25d325c18c6a9453e194e120849a4870b66cc6b9965330013b4898dc856a4699e523a55db080b59ec3a8e4b7e52775b07d1db34ed9c538ab50c551b874aa269add047ad2d5913ac19b7cfbad4a6",
            "08000ebda70a00008e9c083db95b070008090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637",
            1u8,
        ),
        (
            "90d382b410eeba7ad938c46cec1a82bf",
            "000043210000000869d08df7d203329db093fc4924e5bd80f51995881ec4e0c4488987ce742e8109689bb379d2d750c0d915dca346a89f75",
            "0800b5e8a80a0500a69c083d0b660e00777777777777777777777777",
            1,
        ),
        (
            "0123456789abcdef0123456789abcdef",
            "0000876500000002f4e765244f6407adf13dc1380f673f37773b5241a4c449225e4f3ce5ed611b0c237ca96cf74a93013c1b0ea1a0cf70f8e4ecaec78ac53aad7a0f022b859243c647752e94a859352b8a4d4d2decd136e5c177f132ad3fbfb2201ac9904c74ee0a109e0ca1e4dfe9d5a100b842f1c22f0d",
            "45000054090400004001f988c0a87b03c0a87bc808009f76a90a0100b49c083d02a2040008090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334353637",
            4,
        ),
        (
            "0123456789abcdef0123456789abcdef",
            "000087650000000585d47224b5f3dd5d2101d4ea8dffab2215b92683819596a8047232cc00f7048fe45318e11f8a0f62ede3c3fc61203bb50f980a08c9843fd3a1b06d5c07ff9639b7eb7dfb3512e5de435e7207ed971ef3d2726d9b5ef6affc6d17a0decbb13892",
            "45000044090c00004001f990c0a87b03c0a87bc80800d63caa0a0200c69c083da3de0300ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
            4,
        ),
    ];
    let integ_key = vec![0x5a; 20];
    for (i, (key, msg, payload, nh)) in cases.into_iter().enumerate() {
        let mut esp = hex(msg);
        let (spi, seq) = parse_header(&esp).expect("header");
        let s = sa(Cipher::Aes128Cbc, Integ::HmacSha1_96, hex(key), integ_key.clone(), spi, false);
        esp.extend(icv(Integ::HmacSha1_96, &integ_key, &esp).expect("icv"));
        let d = s.decrypt(&mut esp, u64::from(seq)).unwrap_or_else(|e| panic!("case {}: {e}", i + 5));
        assert_eq!(esp[d.inner.clone()], hex(payload)[..], "case {}", i + 5);
        assert_eq!(d.next_header, nh);
    }
}

/// RFC 2404 section 3 (HMAC-SHA-1-96) and RFC 4868 section 2.7.2
/// (AUTH256-1/2, AUTH512-1/2), through the ICV code ESP uses.
#[test]
fn hmac_icvs_of_rfc_2404_and_rfc_4868() {
    let jefe = b"what do ya want for nothing?";
    let cases: [(Integ, Vec<u8>, Vec<u8>, &str); 7] = [
        (Integ::HmacSha1_96, vec![0x0b; 20], b"Hi There".to_vec(), "b617318655057264e28bc0b6"),
        (Integ::HmacSha1_96, b"Jefe".to_vec(), jefe.to_vec(), "effcdf6ae5eb2fa2d27416d5"),
        (Integ::HmacSha1_96, vec![0xaa; 20], vec![0xdd; 50], "125d7342b9ac11cd91a39af4"),
        (Integ::HmacSha256_128, vec![0x0b; 32], b"Hi There".to_vec(), "198a607eb44bfbc69903a0f1cf2bbdc5"),
        (Integ::HmacSha256_128, b"Jefe".repeat(8), jefe.to_vec(), "167f928588c5cc2eef8e3093caa0e87c"),
        (
            Integ::HmacSha512_256,
            vec![0x0b; 64],
            b"Hi There".to_vec(),
            "637edc6e01dce7e6742a99451aae82df23da3e92439e590e43e761b33e910fb8",
        ),
        (
            Integ::HmacSha512_256,
            b"Jefe".repeat(16),
            jefe.to_vec(),
            "cb370917ae8a7ce28cfd1d8f4705d6141c173b2a9362c15df235dfb251b15454",
        ),
    ];
    for (integ, key, data, want) in cases {
        assert_eq!(icv(integ, &key, &data).expect("icv"), hex(want), "{integ}");
    }
}

/// What encrypt writes is checked by the same ICV code and, for GCM, by
/// ring's AEAD with the nonce and AAD RFC 4106 prescribes, built here
/// independently of the crate: salt || IV, SPI || [seq high] || seq low.
#[test]
fn encrypt_follows_rfc_4106_and_4303_layouts() {
    use ring::aead;
    let key = hex("4c80cdefbb5d10da906ac73c3613a634");
    for esn in [false, true] {
        let s = sa(Cipher::Aes128Gcm, Integ::None, [key.clone(), hex("2e443b68")].concat(), vec![], 0x4321, esn);
        let seq = 0x0000_0007_0000_0009u64;
        let inner = b"0123456789abcdefghij".to_vec();
        let h = s.header_len();
        let mut buf = vec![0u8; h + inner.len() + s.trailer_len(inner.len())];
        buf[h..h + inner.len()].copy_from_slice(&inner);
        let n = s.encrypt(&mut buf, inner.len(), 4, seq).expect("encrypt");
        assert_eq!(&buf[8..16], &seq.to_be_bytes(), "IV = the sequence number");
        let nonce = aead::Nonce::try_assume_unique_for_key(&[&hex("2e443b68")[..], &buf[8..16]].concat()).expect("n");
        let aad = if esn { [&buf[0..4], &7u32.to_be_bytes()[..], &buf[4..8]].concat() } else { buf[0..8].to_vec() };
        let k = aead::LessSafeKey::new(aead::UnboundKey::new(&aead::AES_128_GCM, &key).expect("k"));
        let mut ct = buf[16..n].to_vec();
        let pt = k.open_in_place(nonce, aead::Aad::from(aad), &mut ct).expect("RFC 4106 layout");
        // 20 bytes + 2 of padding + pad length 2 + next header 4: aligned to 4.
        assert_eq!(pt, [&inner[..], &[1, 2, 2, 4]].concat());
    }
    // CBC: HMAC over SPI, sequence, IV, ciphertext, then the high bits.
    for esn in [false, true] {
        let ik = vec![9u8; 32];
        let s = sa(Cipher::Aes128Cbc, Integ::HmacSha256_128, vec![3; 16], ik.clone(), 0x4321, esn);
        let seq = 0x0000_0005_0000_0001u64;
        let mut buf = vec![0u8; s.header_len() + 30 + s.trailer_len(30)];
        let n = s.encrypt(&mut buf, 30, 41, seq).expect("encrypt");
        assert_eq!(n, 8 + 16 + 32 + 16, "30 + 2 rounded to 32");
        let authed = if esn { [&buf[..n - 16], &5u32.to_be_bytes()[..]].concat() } else { buf[..n - 16].to_vec() };
        assert_eq!(icv(Integ::HmacSha256_128, &ik, &authed).expect("icv"), &buf[n - 16..n]);
    }
}
