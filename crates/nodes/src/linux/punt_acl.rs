//! `ip4-punt-acl` / `ip6-punt-acl`: the receiving interface's input rule
//! set, for the multicast and broadcast `ip4-input`/`ip6-input` hand to
//! Linux. Packets come here only from interfaces with `acl_in`.
//!
//! Next nodes: [`PuntAclNext`]: `linux-punt`, `ip6-local` (IPv6 only),
//! `drop`. Counters: [`PuntAclError::DESCS`] (and the rule set's per-rule
//! hits).
//!
//! Config: the interfaces' input rule sets.
//!
//! Example: an OSPF hello to 224.0.0.5 on an interface whose input rule
//! set drops its source is dropped as `denied`, counted on the rule; one
//! it accepts leaves for `linux-punt`.
//!
//! Reference: one loop, a key and a classification per packet
//! (control-plane traffic is a trickle); there is no fast path.

use super::*;

/// The `ip4-punt-acl` / `ip6-punt-acl` node (see the module).
pub struct PuntAcl {
    v6: bool,
    ifs: Snapshot<IfTable>,
    acls: Snapshot<AclTable>,
}

impl PuntAcl {
    pub fn new(shared: &Shared, v6: bool) -> Self {
        PuntAcl { v6, ifs: shared.ifaces.snapshot(), acls: shared.acls.snapshot() }
    }
}

tern_engine::errors! {
    /// `ip4-punt-acl` and `ip6-punt-acl`'s counters.
    pub enum PuntAclError {
        Denied = drop("denied", "multicast, broadcast or link-local traffic for the router dropped by the input rule set"),
        NoSet = drop("no-rule-set", "interface bound to a rule set that does not exist"),
        TooShort = drop("too-short", "shorter than the IP header the key needs"),
    }
}

/// Whether `ip6-input` sent this IPv6 packet to `ip6-local` rather than
/// punting it: to the link-scope all-nodes, all-routers or a
/// solicited-node group, or not multicast (tern's link-local address).
fn for_ip6_local(l3: &[u8]) -> bool {
    let dst = l3.get(24..40).and_then(|b| <[u8; 16]>::try_from(b).ok()).map_or(0, u128::from_be_bytes);
    if dst >> 120 != 0xff {
        return true;
    }
    let is_all = dst == 0xff02_0000_0000_0000_0000_0000_0000_0001 || dst == 0xff02_0000_0000_0000_0000_0000_0000_0002;
    is_all || dst >> 24 == 0x00ff_0200_0000_0000_0000_0000_01ff
}

tern_engine::edges! {
    /// The next nodes of `ip4-punt-acl` (all but the last) and
    /// `ip6-punt-acl`.
    pub enum PuntAclNext {
        Drop = "drop",
        Punt = "linux-punt",
        /// IPv6 only, and last.
        Local6 = "ip6-local",
    }
}

impl Node for PuntAcl {
    fn name(&self) -> &'static str {
        if self.v6 { "ip6-punt-acl" } else { "ip4-punt-acl" }
    }
    fn nexts(&self) -> &'static [&'static str] {
        // IPv4 has no `ip6-local`, the last.
        let all = PuntAclNext::NAMES;
        if self.v6 { all } else { all.split_at(PuntAclNext::Local6 as usize).0 }
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        PuntAclError::DESCS
    }
    /// One packet at a time: control-plane multicast is a trickle.
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.acls.refresh();
        let (ifs, acls) = (self.ifs.current(), self.acls.current());
        let worker = usize::from(cx.worker);
        for (o, &p) in next.iter_mut().zip(pkts) {
            let m = cx.pool.meta(p);
            let (rx_if, vlan, len) = (m.rx_if, m.vlan, m.len);
            let Some(set) = ifs.get(rx_if).and_then(|f| f.acl_in).and_then(|s| acls.get(s)) else {
                *o = cx.drop(p, PuntAclError::NoSet);
                continue;
            };
            let l3 = cx.pool.data(p).get(usize::from(m.l3_off)..).unwrap_or_default();
            if l3.len() < if self.v6 { 40 } else { 20 } {
                *o = cx.drop(p, PuntAclError::TooShort);
                continue;
            }
            let mut key = if self.v6 { crate::acl::key_v6(l3) } else { crate::acl::key_v4(l3) };
            key.in_if = rx_if;
            key.vlan = vlan;
            let v = set.classifier.classify(&key);
            if let Some(c) = set.counters.get(worker) {
                c.record(&set.classifier, &key, &v, u32::from(len));
            }
            *o = if v.action == Action::Drop {
                cx.drop(p, PuntAclError::Denied)
            } else if self.v6 && for_ip6_local(l3) {
                PuntAclNext::Local6 as u16
            } else {
                PuntAclNext::Punt as u16
            };
        }
    }
}
