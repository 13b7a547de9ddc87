//! The codec against scapy's `VRRPv3` (golden bytes) and under arbitrary
//! input (decode never panics).

use proptest::prelude::*;
use std::net::IpAddr;
use std::process::Command;
use tern_vrrp::{Advert, virtual_link_local};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

/// scapy's bytes of the VRRPv3 layer for each case, or None (with the
/// reason printed) when /usr/bin/python3 has no scapy.
/// source, destination, vrid, priority, interval (cs), addresses.
type Case = (&'static str, &'static str, u8, u8, u16, Vec<IpAddr>);

fn scapy(cases: &[Case]) -> Option<Vec<Vec<u8>>> {
    let mut script = String::from(
        "import sys\ntry:\n    from scapy.all import IP, IPv6, raw\n    from scapy.layers.vrrp import VRRPv3\n\
         except Exception as e:\n    print('NO-SCAPY', e)\n    sys.exit(0)\n",
    );
    for (src, dst, vrid, prio, int, addrs) in cases {
        let l = addrs.iter().map(|a| format!("'{a}'")).collect::<Vec<_>>().join(",");
        let (ipc, ttl) = if src.contains(':') { ("IPv6", "hlim") } else { ("IP", "ttl") };
        script.push_str(&format!(
            "p={ipc}(src='{src}',dst='{dst}',{ttl}=255)/VRRPv3(vrid={vrid},priority={prio},adv={int},addrlist=[{l}])\n\
             print(raw({ipc}(raw(p))[VRRPv3]).hex())\n"
        ));
    }
    let out = match Command::new("/usr/bin/python3").arg("-c").arg(&script).output() {
        Ok(o) => o,
        Err(e) => {
            println!("skipped: /usr/bin/python3 cannot run: {e}");
            return None;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    if text.starts_with("NO-SCAPY") || !out.status.success() {
        println!("skipped: scapy missing ({}{})", text.trim(), String::from_utf8_lossy(&out.stderr).trim());
        return None;
    }
    Some(
        text.lines()
            .map(|l| (0..l.len()).step_by(2).map(|i| u8::from_str_radix(&l[i..i + 2], 16).expect("hex")).collect())
            .collect(),
    )
}

#[test]
fn encoding_matches_scapy() {
    let ll = IpAddr::V6(virtual_link_local(10));
    let cases: Vec<Case> = vec![
        ("10.1.0.1", "224.0.0.18", 10, 200, 100, vec![ip("10.1.0.254")]),
        ("10.1.0.2", "224.0.0.18", 1, 255, 1, vec![ip("10.1.0.1"), ip("192.0.2.77"), ip("198.51.100.9")]),
        ("192.0.2.1", "224.0.0.18", 255, 0, 4095, vec![ip("192.0.2.254")]),
        ("fe80::1", "ff02::12", 10, 200, 100, vec![ll, ip("2001:db8::1")]),
        ("fe80::abcd:1", "ff02::12", 77, 1, 7, vec![ip("fe80::1")]),
    ];
    let Some(golden) = scapy(&cases) else { return };
    assert_eq!(golden.len(), cases.len());
    for ((src, dst, vrid, priority, interval_cs, addrs), want) in cases.into_iter().zip(golden) {
        let a = Advert { vrid, priority, interval_cs, addrs };
        let got = a.encode(ip(src), ip(dst)).expect("encode");
        assert_eq!(got, want, "{a:?} from {src}");
        assert_eq!(Advert::decode(&want, ip(src), ip(dst), 255), Ok(a), "scapy's bytes decode");
    }
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..600), v6 in any::<bool>(), ttl in any::<u8>()) {
        let (s, d) = if v6 { (ip("fe80::1"), ip("ff02::12")) } else { (ip("10.0.0.1"), ip("224.0.0.18")) };
        let _ = Advert::decode(&bytes, s, d, ttl);
    }

    #[test]
    fn encode_then_decode_is_identity(vrid in 1u8.., priority in any::<u8>(), interval_cs in 1u16..4096, n in 1usize..20, seed in any::<u32>()) {
        let addrs: Vec<IpAddr> = (0..n as u32).map(|i| IpAddr::from((seed.wrapping_add(i)).to_be_bytes())).collect();
        let a = Advert { vrid, priority, interval_cs, addrs };
        let b = a.encode(ip("10.0.0.1"), ip("224.0.0.18")).expect("encode");
        prop_assert_eq!(Advert::decode(&b, ip("10.0.0.1"), ip("224.0.0.18"), 255), Ok(a));
    }
}
