//! scapy as an independent ESP implementation: scapy's
//! `SecurityAssociation` encrypts packets tern-ipsec decrypts, and
//! decrypts what tern-ipsec encrypts, for every algorithm, plain ESP and
//! ESP in UDP, with ESN where scapy supports it (AES-GCM: scapy leaves the
//! high bits out of its HMACs). Skipped, saying why, when
//! `/usr/bin/python3` has no scapy.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;
use tern_ipsec::*;

const PY: &str = "/usr/bin/python3";

fn scapy_missing() -> Option<String> {
    let out = Command::new(PY).args(["-c", "import scapy.layers.ipsec, cryptography"]).output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => Some(String::from_utf8_lossy(&o.stderr).lines().last().unwrap_or("").to_string()),
        Err(e) => Some(e.to_string()),
    }
}

fn oracle(reqs: &[serde_json::Value]) -> Vec<String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/scapy_oracle.py");
    let mut child = Command::new(PY)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    let input = serde_json::to_vec(reqs).expect("json");
    child.stdin.take().expect("stdin").write_all(&input).expect("write");
    let out = child.wait_with_output().expect("oracle");
    assert!(out.status.success(), "oracle failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("answers")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    Key::from_hex(s).unwrap_or_else(|e| panic!("{s}: {e}")).as_bytes().to_vec()
}

fn scapy_names(c: Cipher, i: Integ) -> (&'static str, &'static str) {
    let crypt = if c.is_aead() { "AES-GCM" } else { "AES-CBC" };
    let auth = match i {
        Integ::None => "NULL",
        Integ::HmacSha1_96 => "HMAC-SHA1-96",
        Integ::HmacSha256_128 => "SHA2-256-128",
        Integ::HmacSha512_256 => "SHA2-512-256",
    };
    (crypt, auth)
}

/// An inner IPv4 (or IPv6) UDP packet of `len` bytes.
fn inner(len: usize, v6: bool, fill: u8) -> Vec<u8> {
    let mut p = vec![0u8; len];
    if v6 {
        p[0] = 0x60;
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        p[6] = 17;
        p[7] = 64;
        p[8] = 0x20;
        p[9] = 0x01;
        p[39] = 1;
        p[24] = 0x20;
        p[25] = 0x01;
        p[55.min(len - 1)] = 2;
    } else {
        p[..20].copy_from_slice(&[0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 1, 2, 10, 9, 9, 9]);
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        let c = !ones(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let h = if v6 { 40 } else { 20 };
    for (i, b) in p[h..].iter_mut().enumerate() {
        *b = fill.wrapping_add(i as u8);
    }
    // UDP header: ports, length; checksum 0 is fine for IPv4, scapy does
    // not check it on IPv6 either.
    if len >= h + 8 {
        p[h..h + 4].copy_from_slice(&[0x30, 0x39, 0x30, 0x3a]);
        p[h + 4..h + 6].copy_from_slice(&((len - h) as u16).to_be_bytes());
        p[h + 6..h + 8].copy_from_slice(&[0, 0]);
    }
    p
}

fn ones(h: &[u8]) -> u16 {
    let mut s: u32 = h.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// IPv4 10.0.0.1 -> 10.0.0.2 (+ UDP 4500) around `esp`.
fn outer(esp: &[u8], udp: bool) -> Vec<u8> {
    let l4 = if udp {
        let mut u = vec![0x11, 0x94, 0x11, 0x94, 0, 0, 0, 0];
        u[4..6].copy_from_slice(&((8 + esp.len()) as u16).to_be_bytes());
        [u, esp.to_vec()].concat()
    } else {
        esp.to_vec()
    };
    let mut ip = vec![0x45, 0, 0, 0, 0, 9, 0, 0, 64, if udp { 17 } else { 50 }, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    ip[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    let c = !ones(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    [ip, l4].concat()
}

#[test]
fn scapy_and_tern_read_each_others_esp() {
    if let Some(why) = scapy_missing() {
        println!("skipped: {PY} has no scapy.layers.ipsec / cryptography ({why})");
        return;
    }
    let mut algs = vec![(Cipher::Aes128Gcm, Integ::None), (Cipher::Aes256Gcm, Integ::None)];
    for c in [Cipher::Aes128Cbc, Cipher::Aes256Cbc] {
        for i in [Integ::HmacSha1_96, Integ::HmacSha256_128, Integ::HmacSha512_256] {
            algs.push((c, i));
        }
    }
    let mut reqs = Vec::new();
    // (sa, seq, inner, udp) of each request, in order.
    let mut cases = Vec::new();
    for (k, &(c, i)) in algs.iter().enumerate() {
        let esns: &[bool] = if c.is_aead() { &[false, true] } else { &[false] };
        for &esn in esns {
            for udp in [false, true] {
                let cfg = SaConfig {
                    id: k as u32,
                    spi: 0x1000 + k as u32,
                    cipher: c,
                    integ: i,
                    key: Key::new((0..c.key_len()).map(|x| (x * 13 + k) as u8).collect()),
                    integ_key: Key::new((0..i.key_len()).map(|x| (x * 7 + k) as u8 ^ 0xa5).collect()),
                    esn,
                    replay_window: 0,
                    udp_encap: udp.then(UdpEncap::default),
                    soft: Lifetime::default(),
                    hard: Lifetime::default(),
                };
                let (crypt, auth) = scapy_names(c, i);
                let sa = Sa::new(cfg.clone(), 1, Instant::now()).expect("sa");
                for (n, len) in [28usize, 41, 64, 100, 1418].into_iter().enumerate() {
                    let v6 = n % 2 == 1;
                    let pkt = inner(len.max(if v6 { 48 } else { 28 }), v6, n as u8);
                    let seq = if esn { (3u64 << 32) + n as u64 + 1 } else { n as u64 + 1 };
                    let base = serde_json::json!({
                        "crypt": crypt, "ckey": hex(cfg.key.as_bytes()), "auth": auth,
                        "akey": hex(cfg.integ_key.as_bytes()), "spi": cfg.spi, "esn": esn,
                        "seq": seq, "udp": udp, "src": "10.0.0.1", "dst": "10.0.0.2",
                    });
                    // scapy encrypts, tern decrypts.
                    let mut r = base.clone();
                    r["op"] = "encrypt".into();
                    r["pkt"] = hex(&pkt).into();
                    reqs.push(r);
                    // tern encrypts, scapy decrypts.
                    let h = sa.header_len();
                    let mut buf = vec![0u8; h + pkt.len() + sa.trailer_len(pkt.len())];
                    buf[h..h + pkt.len()].copy_from_slice(&pkt);
                    let nh = if v6 { NH_IPV6 } else { NH_IPV4 };
                    let n = sa.encrypt(&mut buf, pkt.len(), nh, seq).expect("encrypt");
                    let mut r = base;
                    r["op"] = "decrypt".into();
                    r["pkt"] = hex(&outer(&buf[..n], udp)).into();
                    reqs.push(r);
                    cases.push((cfg.clone(), seq, pkt, udp));
                }
            }
        }
    }
    let answers = oracle(&reqs);
    assert_eq!(answers.len(), 2 * cases.len());
    for ((cfg, seq, pkt, udp), pair) in cases.iter().zip(answers.chunks(2)) {
        let what = format!("{} {} esn {} udp {udp} len {}", cfg.cipher, cfg.integ, cfg.esn, pkt.len());
        // scapy's ESP, decrypted here.
        let outer_pkt = unhex(&pair[0]);
        assert_eq!(outer_pkt[9], if *udp { 17 } else { 50 }, "{what}");
        let esp_at = 20 + if *udp { 8 } else { 0 };
        let mut esp = outer_pkt[esp_at..].to_vec();
        let sa = Sa::new(cfg.clone(), 1, Instant::now()).expect("sa");
        let (spi, lo) = parse_header(&esp).expect("header");
        assert_eq!((spi, lo), (cfg.spi, *seq as u32), "{what}");
        let d = sa.decrypt(&mut esp, *seq).unwrap_or_else(|e| panic!("{what}: tern refuses scapy's ESP: {e}"));
        assert_eq!(&esp[d.inner.clone()], &pkt[..], "{what}: scapy -> tern");
        assert_eq!(d.next_header, if pkt[0] >> 4 == 6 { NH_IPV6 } else { NH_IPV4 });
        // tern's ESP, decrypted by scapy.
        assert!(!pair[1].starts_with("error"), "{what}: scapy refuses tern's ESP: {}", pair[1]);
        assert_eq!(unhex(&pair[1]), *pkt, "{what}: tern -> scapy");
    }
    println!("{} packets each way agree with scapy", cases.len());
}
