//! `ip4-acl-in`, `ip6-acl-in`, `ip4-acl-out`, `ip6-acl-out`: the stateless
//! firewall.
//!
//! Only packets of interfaces that have a rule set bound come here:
//! `ip4-input`/`ip6-input` send to the input node when the receiving
//! interface has `acl_in`, the rewrite nodes to the output node when the
//! egress interface has `acl_out`; other packets pay nothing. The key is
//! read from the headers (addresses, protocol, ports or ICMP type/code, TCP
//! flags, DSCP, interfaces, VLAN) and classified by the compiled
//! classifier of `tern-acl`, whose cost stays nearly flat with the number
//! of rules. Every decision is counted per rule, per worker.
//!
//! Next nodes: `ip4-lookup`/`ip6-lookup` (input) or `interface-output`
//! (output) for accepted packets, `drop`. Counters: [`ACL_ERRORS`].

use crate::state::{AclTable, IfTable};
use crate::util::*;
use tern_acl::{Action, PacketKey, Verdict};
use tern_engine::{Cx, ErrorDesc, Node};
use tern_packet::{MAX_BATCH, PktIdx};
use tern_rcu::Snapshot;
use tern_wire::{IpProtocol, ipv6ext};

const E_DENIED: u16 = 0;
const E_NO_SET: u16 = 1;

pub const ACL_ERRORS: &[ErrorDesc] = &[
    ErrorDesc::drop("denied", "dropped by a firewall rule or default policy"),
    ErrorDesc::drop("no-rule-set", "interface bound to a rule set that does not exist"),
];

pub struct AclNode {
    v6: bool,
    out: bool,
    ifs: Snapshot<IfTable>,
    acls: Snapshot<AclTable>,
    keys: Vec<PacketKey>,
    sets: Vec<u16>,
    verdicts: Vec<Verdict>,
}

impl AclNode {
    pub fn new(ifs: Snapshot<IfTable>, acls: Snapshot<AclTable>, v6: bool, out: bool) -> Self {
        AclNode {
            v6,
            out,
            ifs,
            acls,
            keys: vec![PacketKey::default(); MAX_BATCH],
            sets: vec![0; MAX_BATCH],
            verdicts: vec![Verdict::default(); MAX_BATCH],
        }
    }
}

impl Node for AclNode {
    fn name(&self) -> &'static str {
        match (self.v6, self.out) {
            (false, false) => "ip4-acl-in",
            (true, false) => "ip6-acl-in",
            (false, true) => "ip4-acl-out",
            (true, true) => "ip6-acl-out",
        }
    }
    fn nexts(&self) -> &'static [&'static str] {
        match (self.v6, self.out) {
            (false, false) => &["drop", "ip4-lookup"],
            (true, false) => &["drop", "ip6-lookup"],
            (_, true) => &["drop", "interface-output"],
        }
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        ACL_ERRORS
    }

    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.acls.refresh();
        let ifs = self.ifs.current();
        let n = pkts.len();
        let mut same = true;
        for (i, &p) in pkts.iter().enumerate() {
            let m = cx.pool.meta(p);
            let ifindex = if self.out { m.tx_if } else { m.rx_if };
            let set = ifs.get(ifindex).and_then(|f| if self.out { f.acl_out } else { f.acl_in }).unwrap_or(u16::MAX);
            self.sets[i] = set;
            same &= set == self.sets[0];
            let d = cx.pool.data(p);
            let l3 = &d[m.l3_off as usize..];
            let mut k = if self.v6 { key_v6(l3) } else { key_v4(l3) };
            k.in_if = m.rx_if;
            k.out_if = if self.out { m.tx_if } else { 0 };
            k.vlan = m.vlan;
            self.keys[i] = k;
        }
        let acls = self.acls.current();
        if same {
            match acls.get(self.sets[0]) {
                Some(set) => set.classifier.classify_batch(&self.keys[..n], &mut self.verdicts[..n]),
                None => {
                    for (i, &p) in pkts.iter().enumerate() {
                        next[i] = cx.drop(p, E_NO_SET);
                    }
                    return;
                }
            }
        } else {
            for i in 0..n {
                if let Some(set) = acls.get(self.sets[i]) {
                    self.verdicts[i] = set.classifier.classify(&self.keys[i]);
                }
            }
        }
        let worker = usize::from(cx.worker);
        for (i, &p) in pkts.iter().enumerate() {
            let Some(set) = acls.get(self.sets[i]) else {
                next[i] = cx.drop(p, E_NO_SET);
                continue;
            };
            let v = self.verdicts[i];
            if let Some(c) = set.counters.get(worker) {
                c.record(&set.classifier, &self.keys[i], &v, u32::from(cx.pool.meta(p).len));
            }
            next[i] = match v.action {
                Action::Accept => 1,
                Action::Drop => cx.drop(p, E_DENIED),
            };
            if cx.traced(p) {
                let name = set.name.clone();
                cx.trace_note(p, || {
                    format!(
                        "acl {name}: {:?} by {}",
                        v.action,
                        v.rule.map_or("default".into(), |r| format!("rule {r}"))
                    )
                });
            }
        }
    }
}

/// The classifier key of an IPv4 packet (L3 at the start of `l3`).
pub fn key_v4(l3: &[u8]) -> PacketKey {
    let ihl = usize::from(l3[0] & 0x0f) * 4;
    let proto = l3[9];
    let mut k = PacketKey {
        src: u128::from(be32(l3, 12)),
        dst: u128::from(be32(l3, 16)),
        proto,
        dscp: l3[1] >> 2,
        ..PacketKey::default()
    };
    let first_fragment = be16(l3, 6) & 0x1fff == 0;
    if first_fragment {
        l4_fields(&mut k, proto, l3.get(ihl..).unwrap_or_default());
    }
    k
}

/// The classifier key of an IPv6 packet (extension headers walked).
pub fn key_v6(l3: &[u8]) -> PacketKey {
    let mut k = PacketKey {
        src: be128(l3, 8),
        dst: be128(l3, 24),
        is_v6: true,
        proto: l3[6],
        dscp: ((be16(l3, 0) >> 4) as u8) >> 2,
        ..PacketKey::default()
    };
    if let Ok(w) = ipv6ext::walk(IpProtocol(l3[6]), &l3[40..]) {
        k.proto = w.upper_protocol.0;
        if w.has_upper_header() {
            let proto = k.proto;
            l4_fields(&mut k, proto, l3.get(40 + w.upper_offset..).unwrap_or_default());
        }
    }
    k
}

fn l4_fields(k: &mut PacketKey, proto: u8, l4: &[u8]) {
    match proto {
        6 | 17 | 33 | 132 | 136 if l4.len() >= 4 => {
            k.sport = be16(l4, 0);
            k.dport = be16(l4, 2);
            k.l4_valid = true;
            if proto == 6 {
                if l4.len() >= 14 {
                    k.tcp_flags = l4[13];
                } else {
                    k.l4_valid = false;
                }
            }
        }
        1 | 58 if l4.len() >= 2 => {
            k.icmp_type = l4[0];
            k.icmp_code = l4[1];
            k.l4_valid = true;
        }
        _ => {}
    }
}
