// Shared by the targets: compile a rule set with every interface name
// known, and check the classifier against the reference evaluator on keys
// made from the input bytes.
use tern_acl::{compile, linear, PacketKey, RuleSet};

pub fn ifindex(name: &str) -> Option<u16> {
    Some(name.bytes().fold(7u16, |h, b| h.wrapping_mul(31).wrapping_add(b as u16)))
}

pub fn check(set: &RuleSet, bytes: &[u8]) {
    if set.rules.len() > 300 {
        return;
    }
    let Ok(c) = compile(set, &ifindex) else { return };
    for chunk in bytes.chunks(16).take(16) {
        let mut b = [0u8; 16];
        b[..chunk.len()].copy_from_slice(chunk);
        let k = PacketKey {
            src: u128::from_le_bytes(b),
            dst: u128::from_be_bytes(b),
            is_v6: b[0] & 1 == 1,
            proto: [6, 17, 1, 58, b[1]][b[2] as usize % 5],
            sport: u16::from_le_bytes([b[3], b[4]]),
            dport: u16::from_le_bytes([b[5], b[6]]),
            icmp_type: b[7],
            icmp_code: b[8] % 5,
            tcp_flags: b[9],
            in_if: ifindex("eth0").unwrap_or(0) ^ (b[10] as u16 & 1),
            out_if: b[11] as u16,
            vlan: b[12] as u16 % 8,
            dscp: b[13] % 64,
            l4_valid: b[14] & 7 != 0,
        };
        let got = c.classify(&k);
        let want = linear::evaluate(set, &ifindex, &k);
        assert_eq!((got.action, got.rule), (want.action, want.rule), "{k:?}");
    }
}
