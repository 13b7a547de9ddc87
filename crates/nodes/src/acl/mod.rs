//! `ip4-acl-in`, `ip6-acl-in`, `ip4-acl-out`, `ip6-acl-out`: the stateless
//! firewall.
//!
//! Only packets of interfaces that have a rule set bound come here:
//! `ip4-input`/`ip6-input` send to the input node when the receiving
//! interface has `acl_in`, the rewrite nodes to the output node when the
//! egress interface has `acl_out` (each keeps the packets of the flow the
//! rule set last accepted, `crate::shortcut`); other packets pay nothing. The key is
//! read from the headers (addresses, protocol, ports or ICMP type/code, TCP
//! flags, DSCP, interfaces, VLAN) and classified by the compiled
//! classifier of `tern-acl`, whose cost stays nearly flat with the number
//! of rules. Every decision is counted per rule, per worker.
//!
//! Next nodes: `ip4-lookup`/`ip6-lookup` (input) or `interface-output`
//! (output) for accepted packets, `drop` ([`AclNext`]).
//! Counters: [`AclError::DESCS`] and each rule's hits.
//!
//! Config: the rule sets (`AclTable`) and the interfaces' `acl_in` and
//! `acl_out` bindings.
//!
//! Example: with `lan` bound to a set whose rule 3 is `action = "drop"`,
//! `src = "10.0.1.66/32"`, a packet from 10.0.1.66 received on `lan` is
//! dropped as `denied` and counted on rule 3; a packet from 10.0.1.2
//! leaves for `ip4-lookup`, counted on the rule that accepted it.
//!
//! Reference: one key per packet (`key`), classified, its verdict and
//! the rule counted. The fast path (`runs`) classifies one key per run
//! of packets of one flow, with the same verdicts and counters. A run is
//! a grouping within one batch, not a cache (nothing outlives the batch,
//! so no table change can stale it); its signature is held to every key
//! field as the verdict cache's patterns are (`tern_acl::verdict`,
//! `cached_verdicts_see_every_key_field`).

use crate::shortcut::{FlowPattern, SAME, meta_masked, meta16};
use crate::state::{AclTable, IfTable};
use tern_acl::{Action, PacketKey, Verdict};
use tern_engine::{Cx, ErrorDesc, Node};
use tern_intrin::Bytes16;
use tern_packet::{MAX_BATCH, Meta, PacketPool, PktIdx, flags};
use tern_rcu::Snapshot;
use tern_wire::{IpProtocol, ipv6ext};

tern_engine::errors! {
    /// The ACL nodes' counters.
    pub enum AclError {
        Denied = drop("denied", "dropped by a firewall rule or default policy"),
        NoSet = drop("no-rule-set", "interface bound to a rule set that does not exist"),
    }
}

pub struct AclNode {
    v6: bool,
    out: bool,
    ifs: Snapshot<IfTable>,
    acls: Snapshot<AclTable>,
    runs: Runs,
}

/// A batch cut into runs of consecutive packets with one key (one flow,
/// mostly): per run, the key, its rule set, its verdict, the run's first
/// packet and its bytes; `starts` has one more entry, the batch length.
struct Runs {
    keys: Vec<PacketKey>,
    sets: Vec<u16>,
    verdicts: Vec<Verdict>,
    starts: Vec<usize>,
    bytes: Vec<u64>,
}

impl AclNode {
    pub fn new(ifs: Snapshot<IfTable>, acls: Snapshot<AclTable>, v6: bool, out: bool) -> Self {
        AclNode {
            v6,
            out,
            ifs,
            acls,
            runs: Runs {
                keys: vec![PacketKey::default(); MAX_BATCH],
                sets: vec![0; MAX_BATCH],
                verdicts: vec![Verdict::default(); MAX_BATCH],
                starts: vec![0; MAX_BATCH + 1],
                bytes: vec![0; MAX_BATCH],
            },
        }
    }
}

/// No rule set: the packet's interface lost its binding or names a set
/// that does not exist.
const NO_SET: u16 = u16::MAX;

tern_engine::edges! {
    /// The next nodes of `ip4-acl-in` (table 0), `ip6-acl-in` (1) and the
    /// output nodes (2).
    pub enum AclNext {
        Drop = ["drop", "drop", "drop"],
        /// Accepted.
        Pass = ["ip4-lookup", "ip6-lookup", "interface-output"],
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
        AclNext::names(match (self.v6, self.out) {
            (false, false) => 0,
            (true, false) => 1,
            (_, true) => 2,
        })
    }
    fn errors(&self) -> &'static [ErrorDesc] {
        AclError::DESCS
    }

    /// Three passes. Keys: the batch is cut into runs of consecutive
    /// packets with one key; a packet whose key-relevant header bytes and
    /// interfaces equal its predecessor's (`FlowSig`) joins the run
    /// without building its key, and once a run has two packets the rest
    /// are compared in place against its words (`FlowSig::follow`).
    /// Classification: one key per run. Verdicts and rule counters: per
    /// run.
    ///
    /// Measured (callgrind, instructions per packet of `tern-bench engine
    /// --packets 1000000`, over plain forwarding): single-flow-50fw 338 when
    /// every packet's key was built, classified and counted, 91 with runs,
    /// 62 with `follow` (of which ~56 are `follow`'s loop: the meta and
    /// frame bounds checks, five header loads, interfaces, VLAN);
    /// acl-10k 568, 94 and 65; with `follow`'s 16-byte compares 30.4
    /// (of which 24.7 in `follow`) and 33.5. Traffic of all-different
    /// flows gains nothing: drop-test 961, 984 with runs, 976 with
    /// `follow` (on a plain forwarding of 684, 657 and 641 instructions),
    /// 977 with the 16-byte compares (plain 645).
    fn process(&mut self, cx: &mut Cx<'_>, pkts: &[PktIdx], next: &mut [u16]) {
        self.ifs.refresh();
        self.acls.refresh();
        let ifs = self.ifs.current();
        let acls = self.acls.current();
        let n = pkts.len().min(MAX_BATCH).min(next.len());
        let (Some(pkts), Some(next)) = (pkts.get(..n), next.get_mut(..n)) else { return };
        let r = &mut self.runs;
        let (nk, same_set, traced) = match (self.v6, self.out) {
            (false, false) => r.gather::<false, false>(cx.pool, ifs, pkts),
            (true, false) => r.gather::<true, false>(cx.pool, ifs, pkts),
            (false, true) => r.gather::<false, true>(cx.pool, ifs, pkts),
            (true, true) => r.gather::<true, true>(cx.pool, ifs, pkts),
        };
        if nk == 0 {
            return;
        }

        // `gather` fills at most `MAX_BATCH` runs, the vectors' length.
        let (Some(keys), Some(sets), Some(verdicts)) = (r.keys.get(..nk), r.sets.get(..nk), r.verdicts.get_mut(..nk))
        else {
            return;
        };
        if same_set {
            match sets.first().and_then(|&s| acls.get(s)) {
                Some(set) => set.classifier.classify_batch(keys, verdicts),
                None => {
                    for (o, &p) in next.iter_mut().zip(pkts) {
                        *o = cx.drop(p, AclError::NoSet);
                    }
                    return;
                }
            }
        } else {
            for ((k, &s), v) in keys.iter().zip(sets).zip(verdicts.iter_mut()) {
                if let Some(set) = acls.get(s) {
                    *v = set.classifier.classify(k);
                }
            }
        }
        r.apply(cx, acls, nk, same_set, pkts, next);
        if traced {
            r.trace(cx, acls, nk, pkts);
        }
    }
}

mod key;
mod runs;

pub(crate) use key::{KEY_BITS_V6, covers};
pub use key::{key_v4, key_v6};
pub(crate) use runs::Pattern;
