//! The firewall's verdict cache on the forwarding path: "the ACL node is
//! skipped when the cache says accept", once for the input nodes
//! ([`AclShortcut::input_batch`], [`InputAcl`]) and once for the rewrite
//! nodes' output rule sets ([`OutputAcl`]).
//!
//! The cache is [`tern_acl::VerdictCache`], whose module doc
//! (`tern_acl::verdict`) holds the invariants: a cached flow's pattern
//! sees every key field (`PacketKey::FIELDS`, held by
//! `cached_verdicts_see_every_key_field`), an entry answers only under
//! the rule and interface table generations it was learnt under, and only
//! accepts no count-only rule saw are kept, counted on their rule. Here a
//! family's [`FlowPattern`] says which bytes a flow is (the metadata's
//! receiving interface, VLAN and L3 offset, [`SHORTCUT_META`], and the
//! header bytes the key reads; IPv4: `acl::Pattern`, three 16-byte lanes;
//! IPv6: [`Pattern6`], four). A traced packet takes the path its flow's
//! others take, with the note "acl NAME: cached verdict, rule N".
//!
//! A batch's flow is the one learnt from the previous batch's last packet
//! for the ACL node (one classification a batch at most); it takes
//! packets only until the first that goes to the ACL node, so that the
//! lookup sees them in their order, and after that the batch does not
//! compare (traffic of many flows pays for a few compares a batch).
//!
//! Measured (callgrind, instructions per packet of `tern-bench engine
//! --packets 1000000`, over plain): single-flow-50fw 33.4 with every
//! packet through `ip4-acl-in` (its `follow` 21.5, the rule-set question
//! 6, the node ~5), 21.1 with the shortcut; traffic of many flows pays ~4
//! more (gre-multi-flow, drop-test, 900k-routes-50fw). By time the
//! shortcut was slower than `ip4-acl-in` until the metadata was read
//! before `ip4-input` writes it ([`meta16`]). IPv6: [`Pattern6`].

use crate::acl::key_v6;
use crate::state::{AclTable, IfTable};
use tern_acl::{Generation, PacketKey, VerdictCache};
use tern_engine::Cx;
use tern_intrin::Bytes16;
use tern_packet::{Meta, PacketPool, PktIdx};
use tern_rcu::Snapshot;
use tern_wire::IpProtocol;

/// A family's pattern of an accepted flow, which the input node keeps at
/// hand during a batch: the metadata bytes of [`SHORTCUT_META`] and the
/// header bytes the flow's key is made of.
pub(crate) trait FlowPattern: Copy {
    /// The L3 bytes [`FlowPattern::compare`] reads.
    type Head;
    /// L3 bytes a packet needs within its length for every transport
    /// field a key reads (the TCP flags are the last): a packet of the
    /// flow at another length has the flow's key when it has them.
    const KEY_BYTES: usize;
    /// No flow: takes no packet.
    const NONE: Self;
    /// The input node's next index of the family's ACL node.
    const ACL_NEXT: u16;
    /// The input node's next index of the family's lookup.
    const LOOKUP_NEXT: u16;
    /// The input node's next index of traffic for tern or Linux through
    /// the input rule set (`ip4-punt-acl`, `ip6-punt-acl`).
    const PUNT_ACL_NEXT: u16;

    /// Whether the input node's next index `n` hands a packet to tern or
    /// Linux, which with an input rule set goes through
    /// [`FlowPattern::PUNT_ACL_NEXT`].
    fn punted(n: u16) -> bool;

    /// The packet (metadata bytes `meta`, [`meta16`]; its L3 bytes `h`)
    /// against the pattern, byte by byte under the masks: bit `i` set
    /// when byte `i` agrees in the metadata and every header lane. With
    /// [`FlowPattern::tcp_agrees`], [`SAME`]: the flow's packet.
    fn compare(&self, meta: Bytes16, h: &Self::Head) -> u16;

    /// Whether a packet that [`FlowPattern::compare`] gave `bits` is the
    /// flow's but for its length (its TCP flags aside).
    fn other_len(&self, bits: u16, meta: Bytes16, h: &Self::Head) -> bool;

    /// The flow's TCP flags, when it is TCP (its packets' flags are
    /// compared too).
    fn tcp_flags(&self) -> Option<u8>;

    /// The pattern and key of a packet (`m`; `l3`, its L3 bytes up to its
    /// length), if its key can be told by the pattern's bytes.
    fn of(m: &Meta, l3: &[u8]) -> Option<(Self, PacketKey)>;

    /// The bytes [`FlowPattern::compare`] reads of a packet's L3 bytes
    /// `l3` (up to its length), and the byte its TCP flags would be
    /// (0 when it lies past them); None when `l3` is shorter.
    fn head(l3: &[u8]) -> Option<(&Self::Head, u8)>;

    #[inline(always)]
    fn is_tcp(&self) -> bool {
        self.tcp_flags().is_some()
    }

    /// Whether TCP flags `flags` are the flow's, if it is TCP.
    #[inline(always)]
    fn tcp_agrees(&self, flags: u8) -> bool {
        self.tcp_flags().is_none_or(|t| t == flags)
    }
}

/// [`FlowPattern::compare`] of the flow's packets.
pub(crate) const SAME: u16 = 0xffff;

/// Metadata bytes 0-7 (`off`, `len`, `rx_if`, `tx_if`) and 8-15
/// (`l3_off`, `vlan`, `error`, `flags`) an accepted flow's packets share:
/// the receiving interface, L3 offset and VLAN. (Their length is the L3
/// offset plus the header's length, which the header lanes hold.) Not the
/// traced flag: a traced packet takes the path its flow's others take,
/// with a trace note saying so.
pub(crate) const SHORTCUT_META: (u64, u64) = (0xffff << 32, 0xffff | 0xffff << 16);

/// [`meta16`] under [`SHORTCUT_META`].
#[inline(always)]
pub(crate) fn meta_masked(meta: Bytes16) -> Bytes16 {
    meta.and(Bytes16::from_words(SHORTCUT_META.0, SHORTCUT_META.1))
}

/// A packet's metadata bytes 0-15 as [`Bytes16`] (one load). The input
/// nodes read them before they write the metadata: a 16-byte load just
/// after a narrower store to the same bytes waits for the store (no
/// forwarding), which cost more time than the whole compare.
#[inline(always)]
pub(crate) fn meta16(m: &Meta) -> Bytes16 {
    Bytes16::load(m.head())
}

/// A node's shortcut through its interfaces' rule sets (module docs): the
/// rule table and the [`VerdictCache`] of its family's pattern, which
/// owns the entry, its invalidation and its counting.
pub(crate) struct AclShortcut<P> {
    acls: Snapshot<AclTable>,
    cache: VerdictCache<P>,
    /// The tables' generation this batch runs under.
    now: Generation,
}

impl<P: FlowPattern> AclShortcut<P> {
    pub(crate) fn new(acls: Snapshot<AclTable>) -> Self {
        AclShortcut { acls, cache: VerdictCache::new(P::NONE), now: Generation::default() }
    }

    /// At the start of a batch, with the interface table of generation
    /// `ifs` (the node's snapshot, refreshed): the pattern the batch
    /// compares ([`VerdictCache::start`]: an entry of older tables answers
    /// nothing).
    #[inline]
    pub(crate) fn start(&mut self, ifs: u64) -> P {
        self.acls.refresh();
        self.now = Generation { rules: self.acls.generation(), ifs };
        self.cache.start(self.now)
    }

    /// Forgets the flows, for a batch that does not ask the shortcut
    /// (`FastPaths::acl_shortcut` off): once it is back on, it starts
    /// from a flow it learns then.
    #[inline]
    pub(crate) fn forget(&mut self) {
        self.cache.forget();
    }

    /// The trace note of a packet the batch's flow took.
    #[cold]
    pub(crate) fn note(&self) -> String {
        let set = self.acls.current().get(self.cache.entry().set);
        self.cache.note(set.map_or("?", |s| s.name.as_str()))
    }

    /// Counts a packet that [`FlowPattern::other_len`] found the flow's
    /// but for its length, if its TCP flags (`tcp`) are the flow's and its
    /// length holds the transport bytes the flow's key reads; whether it
    /// does.
    #[cold]
    #[inline(never)]
    pub(crate) fn take_other_len(&mut self, m: &Meta, tcp: u8) -> bool {
        if !self.cache.entry().pattern.tcp_agrees(tcp) || usize::from(m.len) < usize::from(m.l3_off) + P::KEY_BYTES {
            return false;
        }
        self.cache.take_other_len(m.len);
        true
    }

    /// Learns the flow of a packet (metadata `m`, its L3 bytes `l3` up to
    /// its length) from its interface's rule set (in `ifs`): the receiving
    /// interface's input rule set, or with `OUT` the transmitting
    /// interface's output rule set (the key's `out_if`, the entry's);
    /// [`VerdictCache::learn`] keeps it if the rule set accepts it and no
    /// count-only rule sees it. The next batch takes it. The packet
    /// itself goes on to the ACL node.
    #[cold]
    #[inline(never)]
    pub(crate) fn learn<const OUT: bool>(&mut self, ifs: &IfTable, m: &Meta, l3: &[u8]) {
        let bound =
            if OUT { ifs.get(m.tx_if).and_then(|f| f.acl_out) } else { ifs.get(m.rx_if).and_then(|f| f.acl_in) };
        let Some(set) = bound else { return };
        let Some(rules) = self.acls.current().get(set) else { return };
        let Some((pattern, mut key)) = P::of(m, l3) else { return };
        key.out_if = if OUT { m.tx_if } else { 0 };
        self.cache.learn(self.now, &rules.classifier, &key, (pattern, set, m.len));
    }

    /// At the end of a batch: adds what the batch's flow took (`hits` of
    /// its length, counted by the caller, besides the others) to its rule's
    /// counters (`worker`'s); the packets taken since the last call.
    #[inline]
    pub(crate) fn finish(&mut self, worker: u16, hits: u64) -> u64 {
        let acls = self.acls.current();
        let counters = acls.get(self.cache.entry().set).and_then(|s| s.counters.get(usize::from(worker)));
        self.cache.finish(counters, hits)
    }

    /// An input node's batch with input rule sets (`by_if`: which
    /// interfaces have one; `ifs`: the interface table, of generation
    /// `ifs_gen`), validated by `v`: with the shortcut on (`on`), the
    /// flow the rule set last accepted skips the ACL node
    /// ([`validate_batch_acl`]); the packets it took are counted on their
    /// rule and on the node's counter `counter` (`acl-shortcut`). Off,
    /// every packet with a rule set goes to the ACL node.
    #[inline]
    pub(crate) fn input_batch<V: ValidateAcl<P>>(
        &mut self,
        cx: &mut Cx<'_>,
        (pkts, next): (&[PktIdx], &mut [u16]),
        v: &V,
        (by_if, ifs, ifs_gen): (&[bool], &IfTable, u64),
        (on, counter): (bool, u16),
    ) {
        let flow = if on {
            self.start(ifs_gen)
        } else {
            self.forget();
            P::NONE
        };
        let worker = cx.worker;
        let hits = validate_batch_acl(cx, pkts, next, v, (by_if, ifs, &mut *self, flow));
        let taken = self.finish(worker, hits);
        if taken != 0 {
            cx.count(counter, taken);
        }
    }
}

/// The packets before the first look at whether the shortcut stopped,
/// and between the later ones.
const SHORTCUT_FIRST_RUN: usize = 16;
const SHORTCUT_RUN: usize = 64;

/// How an input node's validation asks the shortcut: not at all (the
/// interface has a rule set or not), against the flow's pattern, and
/// against its TCP flags too.
pub(crate) const NO_FLOW: u8 = 0;
pub(crate) const FLOW: u8 = 1;
pub(crate) const TCP_FLOW: u8 = 2;

/// An input node's validation of one packet with input rule sets: the
/// next index, asking `acl` ([`InputAcl::direct`]) how to ask for the
/// packets it sends to the lookup.
pub(crate) trait ValidateAcl<P: FlowPattern> {
    fn validate<const S: u8>(&self, cx: &mut Cx<'_>, p: PktIdx, acl: &mut InputAcl<'_, P>) -> u16;
}

/// An input node's validation over a batch with input rule sets (which
/// interfaces have one, the interface table, the shortcut and its flow's
/// pattern); the packets the
/// flow's pattern took. The pattern takes packets only until the first
/// packet that goes to the ACL node, so that the lookup sees the packets
/// in their order (those taken reach it first); the rest of the batch
/// only asks whether the interface has a rule set, from the next run of
/// packets on ([`SHORTCUT_FIRST_RUN`], then [`SHORTCUT_RUN`] packets;
/// traffic of many flows pays for a few compares a batch). Then learns
/// the flow of the batch's last packet for the ACL node, which the next
/// batch most likely starts with.
#[inline(never)]
pub(crate) fn validate_batch_acl<P: FlowPattern, V: ValidateAcl<P>>(
    cx: &mut Cx<'_>,
    pkts: &[PktIdx],
    next: &mut [u16],
    v: &V,
    (by_if, ifs, shortcut, flow): (&[bool], &IfTable, &mut AclShortcut<P>, P),
) -> u64 {
    let mut acl = InputAcl { by_if, shortcut, flow, hits: 0, stopped: false };
    let (mut done, mut run) = (0, SHORTCUT_FIRST_RUN);
    while done < pkts.len().min(next.len()) {
        if acl.stopped {
            break;
        }
        let end = pkts.len().min(next.len()).min(done + run);
        let (Some(nc), Some(pc)) = (next.get_mut(done..end), pkts.get(done..end)) else { break };
        (done, run) = (end, SHORTCUT_RUN);
        if flow.is_tcp() {
            for (o, &p) in nc.iter_mut().zip(pc) {
                *o = v.validate::<TCP_FLOW>(cx, p, &mut acl);
            }
        } else {
            for (o, &p) in nc.iter_mut().zip(pc) {
                *o = v.validate::<FLOW>(cx, p, &mut acl);
            }
        }
    }
    let rest = next.get_mut(done..).unwrap_or_default().iter_mut().zip(pkts.get(done..).unwrap_or_default());
    for (o, &p) in rest {
        *o = v.validate::<NO_FLOW>(cx, p, &mut acl);
    }
    // Without a stop, no packet went to the ACL node.
    if acl.stopped
        && let Some(i) = next.iter().rposition(|&n| n == P::ACL_NEXT)
        && let Some(&p) = pkts.get(i)
    {
        let (m, d) = cx.pool.pkt(p);
        acl.shortcut.learn::<false>(ifs, m, d.get(usize::from(m.l3_off)..).unwrap_or_default());
    }
    acl.hits
}

/// An input node's part of an input rule set during a batch: which
/// interfaces have one, and the flow it last accepted ([`AclShortcut`]):
/// its pattern at hand, the packets it took, whether a packet went to the
/// ACL node (after which the pattern takes none).
pub(crate) struct InputAcl<'a, P> {
    by_if: &'a [bool],
    shortcut: &'a mut AclShortcut<P>,
    flow: P,
    hits: u64,
    stopped: bool,
}

impl<P: FlowPattern> InputAcl<'_, P> {
    /// The next index of a packet with an ordinary header bound for the
    /// lookup (`m`; `h`: its L3 bytes the pattern compares; `tcp`: its TCP
    /// flags, read when `S` is [`TCP_FLOW`]): the lookup, unless its
    /// interface has an input rule set that has not accepted its flow yet
    /// (the ACL node). `S`: how to ask ([`FLOW`]). `meta`: [`meta16`] of
    /// `m`, read before the node wrote to `m`.
    #[inline(always)]
    pub(crate) fn direct<const S: u8>(&mut self, meta: Bytes16, m: &Meta, h: &P::Head, tcp: u8) -> u16 {
        if S == NO_FLOW {
            return self.ask(m);
        }
        let bits = self.flow.compare(meta, h);
        if bits == SAME && (S != TCP_FLOW || self.flow.tcp_agrees(tcp)) {
            self.hits += 1;
            return P::LOOKUP_NEXT;
        }
        self.missed(meta, m, h, tcp, bits)
    }

    /// [`Self::direct`] for a packet the flow's pattern did not take
    /// (`bits`: [`FlowPattern::compare`]): the flow's at another length,
    /// or for the ACL node; then the pattern takes no more packets in this
    /// batch.
    #[inline(never)]
    fn missed(&mut self, meta: Bytes16, m: &Meta, h: &P::Head, tcp: u8, bits: u16) -> u16 {
        if self.flow.other_len(bits, meta, h) && self.shortcut.take_other_len(m, tcp) {
            return P::LOOKUP_NEXT;
        }
        let n = self.ask(m);
        if n != P::LOOKUP_NEXT {
            self.stop();
        }
        n
    }

    /// The next index, with input rule sets (`acl`), of a packet the input
    /// node's general path sent to `n`, received on `rx_if`: through the
    /// interface's input rule set if it has one: the ACL node for the
    /// lookup (the shortcut then stops for the batch), the punt through
    /// the rule set for tern or Linux ([`FlowPattern::punted`]).
    #[inline]
    pub(crate) fn general(acl: Option<&mut Self>, n: u16, rx_if: u16) -> u16 {
        let Some(a) = acl else { return n };
        if !a.has_rules(rx_if) {
            return n;
        }
        if n == P::LOOKUP_NEXT {
            a.stop();
            P::ACL_NEXT
        } else if P::punted(n) {
            P::PUNT_ACL_NEXT
        } else {
            n
        }
    }

    /// A packet went to the ACL node: the pattern takes no more packets in
    /// this batch, which keeps their order.
    #[inline]
    fn stop(&mut self) {
        self.flow = P::NONE;
        self.stopped = true;
    }

    /// Whether the receiving interface has an input rule set: then the
    /// ACL node, else the lookup.
    #[inline(always)]
    fn ask(&self, m: &Meta) -> u16 {
        if self.has_rules(m.rx_if) { P::ACL_NEXT } else { P::LOOKUP_NEXT }
    }

    /// Whether interface `rx_if` has an input rule set.
    #[inline(always)]
    pub(crate) fn has_rules(&self, rx_if: u16) -> bool {
        self.by_if.get(usize::from(rx_if)).copied().unwrap_or(false)
    }
}

/// A rewrite node's shortcut through the output rule sets during a batch:
/// the flow the output rule set of its transmitting interface last
/// accepted ([`AclShortcut`], learnt with `OUT`), which takes packets of
/// that interface's adjacencies bound for the ACL node, as an input
/// node's takes packets of its receiving interface; until a packet of the
/// batch goes to the ACL node, so that `interface-output` sees the
/// packets in their order. The flow's packets are taken in runs
/// ([`OutputAcl::run`]), each compared before the node writes its header
/// or metadata; a packet a run did not take is asked
/// ([`OutputAcl::ask`]) before those writes too, and decided
/// ([`OutputAcl::decide`]) once the node forwards it.
///
/// The transmitting interface is not in the pattern: it is the
/// adjacency's, compared once an adjacency ([`OutputAcl::applies`]). The
/// TTL or hop limit, which the node decrements, is not in the patterns,
/// nor is the IPv4 checksum.
pub(crate) struct OutputAcl<'a, P> {
    shortcut: &'a mut AclShortcut<P>,
    flow: P,
    hits: u64,
    stopped: bool,
}

/// How far from a batch's end [`OutputAcl::finish`] looks for a packet
/// to learn from (a rewrite node does not note which packets went to the
/// ACL node once the shortcut stopped asking).
const LEARN_FROM_LAST: usize = 32;

/// What [`OutputAcl::ask`] found: the flow's packet, the flow's but for
/// its length (with its TCP flags), or neither.
#[derive(Clone, Copy)]
pub(crate) enum Asked {
    Flow,
    OtherLen(u8),
    No,
}

impl<'a, P: FlowPattern> OutputAcl<'a, P> {
    /// At the start of a batch ([`AclShortcut::start`]).
    #[inline]
    pub(crate) fn start(shortcut: &'a mut AclShortcut<P>, ifs: u64) -> Self {
        let flow = shortcut.start(ifs);
        let stopped = !shortcut.cache.live();
        OutputAcl { shortcut, flow, hits: 0, stopped }
    }

    /// Whether the shortcut has a flow and no packet of the batch went to
    /// the ACL node yet: while it does not, the node need not ask it.
    #[inline(always)]
    pub(crate) fn asks(&self) -> bool {
        !self.stopped
    }

    /// Whether the flow may take packets of an adjacency on transmitting
    /// interface `tx_if` (the flow's), while it [`OutputAcl::asks`].
    /// Asked once an adjacency.
    #[inline]
    pub(crate) fn applies(&self, tx_if: u16) -> bool {
        tx_if == self.shortcut.cache.entry().out_if
    }

    /// A packet bound for the ACL node of an adjacency the flow
    /// [`OutputAcl::applies`] to (`meta`: [`meta16`] of its metadata;
    /// `l3`: its L3 bytes up to its length) against the flow, before the
    /// node writes either.
    #[inline(always)]
    pub(crate) fn ask(&self, meta: Bytes16, l3: &[u8]) -> Asked {
        let Some((h, tcp)) = P::head(l3) else { return Asked::No };
        let bits = self.flow.compare(meta, h);
        if bits == SAME && self.flow.tcp_agrees(tcp) {
            return Asked::Flow;
        }
        if bits != SAME && self.flow.other_len(bits, meta, h) {
            return Asked::OtherLen(tcp);
        }
        Asked::No
    }

    /// The flow's packets from the first of `pkts` on, while they keep to
    /// next hop `nh` (of an adjacency the flow [`OutputAcl::applies`] to)
    /// and `forward` (the node's direct path) passes them. Their next
    /// index is `out`; the number taken. A loop of its own, which keeps
    /// no more than these in its registers. The flow's L3 offset is 14
    /// (the direct path's).
    #[inline(always)]
    pub(crate) fn run(
        &mut self,
        pool: &mut PacketPool,
        (pkts, next): (&[PktIdx], &mut [u16]),
        nh: u32,
        out: u16,
        forward: impl Fn(&mut Meta, &mut [u8]) -> bool,
    ) -> usize {
        let n = if self.flow.is_tcp() {
            self.run_as::<true>(pool, pkts, next, nh, out, forward)
        } else {
            self.run_as::<false>(pool, pkts, next, nh, out, forward)
        };
        self.hits += n as u64;
        n
    }

    #[inline(always)]
    fn run_as<const TCP: bool>(
        &self,
        pool: &mut PacketPool,
        pkts: &[PktIdx],
        next: &mut [u16],
        nh: u32,
        out: u16,
        forward: impl Fn(&mut Meta, &mut [u8]) -> bool,
    ) -> usize {
        let mut n = 0;
        for (o, &p) in next.iter_mut().zip(pkts) {
            let (m, d) = pool.pkt_mut(p);
            if m.nh != nh {
                break;
            }
            // A packet whose L3 offset is not 14 differs in the metadata.
            let meta = meta16(m);
            let Some((h, tcp)) = d.get(14..).and_then(P::head) else { break };
            if self.flow.compare(meta, h) != SAME || TCP && !self.flow.tcp_agrees(tcp) || !forward(m, d) {
                break;
            }
            *o = out;
            n += 1;
        }
        n
    }

    /// Whether the shortcut takes a packet (`m`) that [`OutputAcl::ask`]
    /// found `asked` and that the node forwards to the ACL node's
    /// interface; if not, the packet goes to the ACL node and the flow
    /// takes no more packets in this batch ([`OutputAcl::asks`]).
    #[inline(always)]
    pub(crate) fn decide(&mut self, asked: Asked, m: &Meta) -> bool {
        let taken = match asked {
            Asked::Flow => {
                self.hits += 1;
                true
            }
            Asked::OtherLen(tcp) => self.shortcut.take_other_len(m, tcp),
            Asked::No => false,
        };
        self.stopped |= !taken;
        taken
    }

    /// At the end of a batch: learns the flow of the batch's last packet
    /// for the ACL node (next index `acl_next`) among its last
    /// [`LEARN_FROM_LAST`], which the next batch most likely starts with,
    /// and counts what the flow took on its rule
    /// ([`AclShortcut::finish`]); the packets taken.
    #[inline]
    pub(crate) fn finish(self, cx: &Cx<'_>, ifs: &IfTable, pkts: &[PktIdx], next: &[u16], acl_next: u16) -> u64 {
        let from = next.len().saturating_sub(LEARN_FROM_LAST);
        if let Some(i) = next.get(from..).and_then(|l| l.iter().rposition(|&n| n == acl_next))
            && let Some(&p) = pkts.get(from + i)
        {
            let (m, d) = (cx.pool.meta(p), cx.pool.data(p));
            self.shortcut.learn::<true>(ifs, m, d.get(usize::from(m.l3_off)..).unwrap_or_default());
        }
        self.shortcut.finish(cx.worker, self.hits)
    }
}

/// An accepted IPv6 flow's pattern: metadata bytes 0-15 under
/// [`SHORTCUT_META`] and L3 bytes 0-47 in three lanes under
/// [`PATTERN6_MASKS`] (version and DSCP, payload length, next header,
/// both addresses, the first four transport bytes: ports, ICMPv6 type and
/// code with the checksum), the TCP flags (L3 byte 53) when TCP. Only for
/// packets whose next header is not an extension header (their key reads
/// no byte past the transport header's first 14), with the transport
/// bytes the key reads: 48 L3 bytes, 54 for TCP. Without a flow, byte 0 is
/// 0, which no packet that asks has (they are version 6).
///
/// Measured (callgrind, instructions per packet of `tern-bench engine
/// --packets 1000000 --scenario single-flow6-50fw` over plain6's 552.1):
/// 285.7 with every packet's key built in `ip6-acl-in`, 19.4 with the
/// shortcut (`git show fdbc271:docs/PERFORMANCE.md`, "The shortcut for IPv6").
#[derive(Clone, Copy)]
pub(crate) struct Pattern6 {
    meta: Bytes16,
    h: [Bytes16; 3],
    tcp_flags: Option<u8>,
}

/// [`Pattern6`]'s masks of L3 bytes 0-15, 16-31, 32-47 (little-endian
/// words): bytes 0, 1 (the DSCP's top two bits), 4-6 (payload length,
/// next header), 8-43; not the flow label, hop limit, or bytes 44-47
/// (UDP length and checksum, TCP sequence number).
const PATTERN6_MASKS: [(u64, u64); 3] = [(0x00ff_ffff_0000_c0ff, !0), (!0, !0), (!0, 0xffff_ffff)];

// Every bit the key reads (`acl::KEY_BITS_V6`) is under the masks, checked
// when compiling; of bytes 48-53 only the TCP flags (53), compared on
// their own.
const _: () = {
    use crate::acl::{KEY_BITS_V6, covers};
    let [(a, b), (c, d), (e, f)] = PATTERN6_MASKS;
    assert!(covers(a, &KEY_BITS_V6, 0) && covers(b, &KEY_BITS_V6, 8) && covers(c, &KEY_BITS_V6, 16));
    assert!(covers(d, &KEY_BITS_V6, 24) && covers(e, &KEY_BITS_V6, 32) && covers(f, &KEY_BITS_V6, 40));
    assert!(covers(0xff << 40, &KEY_BITS_V6, 48));
};
/// Lane 0's payload length bytes (4, 5) as compare bits.
const PAYLOAD_LEN6: u16 = 0b11_0000;

#[inline(always)]
fn lanes6(h: &[u8; 48]) -> [Bytes16; 3] {
    let lane = |i: usize| {
        let b = h.get(16 * i..).and_then(|r| r.first_chunk::<16>()).unwrap_or(&[0; 16]);
        // `i` is a constant after inlining: no check is left.
        let (w0, w1) = PATTERN6_MASKS.get(i).copied().unwrap_or((0, 0));
        Bytes16::load(b).and(Bytes16::from_words(w0, w1))
    };
    [lane(0), lane(1), lane(2)]
}

impl FlowPattern for Pattern6 {
    type Head = [u8; 48];
    const KEY_BYTES: usize = 54;
    const NONE: Pattern6 = Pattern6 { meta: Bytes16::ZERO, h: [Bytes16::ZERO; 3], tcp_flags: None };
    const ACL_NEXT: u16 = crate::ip6::Ip6InputNext::AclIn as u16;
    const LOOKUP_NEXT: u16 = crate::ip6::Ip6InputNext::Lookup as u16;
    const PUNT_ACL_NEXT: u16 = crate::ip6::Ip6InputNext::PuntAcl as u16;

    /// Multicast for Linux, and link-scoped traffic for tern (ND,
    /// link-local).
    #[inline(always)]
    fn punted(n: u16) -> bool {
        n == crate::ip6::Ip6InputNext::Punt as u16 || n == crate::ip6::Ip6InputNext::Local as u16
    }

    #[inline(always)]
    fn compare(&self, meta: Bytes16, h: &[u8; 48]) -> u16 {
        let [l0, l1, l2] = lanes6(h);
        meta_masked(meta).eq(self.meta).and(l0.eq(self.h[0])).and(l1.eq(self.h[1])).and(l2.eq(self.h[2])).top_bits()
    }

    /// Lane 0's payload length bytes share their compare bits with the
    /// metadata's receiving interface and address bytes of the other
    /// lanes, so the packet is compared again with lane 0 alone asked
    /// about the length.
    fn other_len(&self, _bits: u16, meta: Bytes16, h: &[u8; 48]) -> bool {
        let [l0, l1, l2] = lanes6(h);
        let rest = meta_masked(meta).eq(self.meta).and(l1.eq(self.h[1])).and(l2.eq(self.h[2])).top_bits();
        let first = l0.eq(self.h[0]).top_bits();
        rest == SAME && first != SAME && first | PAYLOAD_LEN6 == SAME
    }

    #[inline(always)]
    fn tcp_flags(&self) -> Option<u8> {
        self.tcp_flags
    }

    #[inline(always)]
    fn head(l3: &[u8]) -> Option<(&[u8; 48], u8)> {
        Some((l3.first_chunk::<48>()?, l3.get(53).copied().unwrap_or(0)))
    }

    fn of(m: &Meta, l3: &[u8]) -> Option<(Pattern6, PacketKey)> {
        let h = l3.first_chunk::<48>()?;
        let proto = h[6];
        if h[0] >> 4 != 6 || IpProtocol(proto).is_ipv6_ext_header() || proto == 6 && l3.len() < 54 {
            return None;
        }
        let mut key = key_v6(l3);
        key.in_if = m.rx_if;
        key.vlan = m.vlan;
        let tcp_flags = (proto == 6).then(|| l3.get(53).copied().unwrap_or(0));
        Some((Pattern6 { meta: meta_masked(meta16(m)), h: lanes6(h), tcp_flags }, key))
    }
}

/// A value and what it stands for, in a test's messages.
#[cfg(test)]
pub(crate) type Named<T> = (&'static str, T);

/// A flow's metadata `m` changed in each field a pattern compares
/// (receiving interface, VLAN, L3 offset), and in each it does not
/// (length, offset, transmit interface, error, other flags, the traced
/// flag).
#[cfg(test)]
pub(crate) fn meta_variants(m: &Meta) -> ([Named<Meta>; 3], [Named<Meta>; 6]) {
    let m = *m;
    (
        [
            ("rx_if", Meta { rx_if: m.rx_if ^ 4, ..m }),
            ("vlan", Meta { vlan: m.vlan ^ 4, ..m }),
            ("l3_off", Meta { l3_off: m.l3_off + 4, ..m }),
        ],
        [
            ("traced", Meta { flags: m.flags | tern_packet::flags::TRACED, ..m }),
            ("len", Meta { len: m.len + 1, ..m }),
            ("off", Meta { off: m.off ^ 64, ..m }),
            ("tx_if", Meta { tx_if: m.tx_if ^ 9, ..m }),
            ("error", Meta { error: m.error ^ 5, ..m }),
            ("flags", Meta { flags: m.flags | tern_packet::flags::L3_CSUM_OK, ..m }),
        ],
    )
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// The IPv6 pattern takes a packet only when every byte of the key
    /// (version and DSCP, next header, addresses, the first four transport
    /// bytes), the payload length, the receiving interface, VLAN and L3
    /// offset agree and it is not traced; another payload length alone
    /// makes it the flow's at another length; the flow label, hop limit
    /// and transport bytes 4-7 do not matter. Extension headers and TCP
    /// headers without their flags have no pattern.
    #[test]
    fn pattern6_sees_every_key_field() {
        for proto in [6u8, 17, 58] {
            let mut l3 = [0u8; 60];
            l3[0] = 0x60;
            l3[4..6].copy_from_slice(&20u16.to_be_bytes());
            l3[6] = proto;
            l3[7] = 64;
            l3[8] = 0x20;
            l3[23] = 2;
            l3[24] = 0x20;
            l3[39] = 1;
            l3[40..44].copy_from_slice(&[0x04, 0xd2, 0x00, 0x35]);
            l3[53] = 0x12;
            let m = Meta { off: 64, len: 14 + 60, rx_if: 1, tx_if: 2, l3_off: 14, vlan: 3, ..Meta::default() };
            let (p, key) = Pattern6::of(&m, &l3).expect("pattern");
            assert_eq!(key, {
                let mut k = key_v6(&l3);
                k.in_if = 1;
                k.vlan = 3;
                k
            });
            let h = l3.first_chunk::<48>().expect("48");
            let takes = |m: &Meta, h: &[u8; 48], tcp: u8| p.compare(meta16(m), h) == SAME && p.tcp_agrees(tcp);
            let other_len = |m: &Meta, h: &[u8; 48]| {
                let b = p.compare(meta16(m), h);
                b != SAME && p.other_len(b, meta16(m), h)
            };
            assert!(takes(&m, h, 0x12), "proto {proto}");
            assert_eq!(takes(&m, h, 0x10), proto != 6, "proto {proto}: TCP flags");
            assert!(Pattern6::NONE.compare(meta16(&m), h) != SAME);
            for at in 0..48 {
                for bit in [0x01u8, 0x80] {
                    let mut o = *h;
                    o[at] ^= bit;
                    let key = matches!(at, 0 | 6 | 8..=43) || (at == 1 && bit == 0x80);
                    let length = matches!(at, 4 | 5);
                    assert_eq!(takes(&m, &o, 0x12), !key && !length, "proto {proto} byte {at} bit {bit:#x}");
                    assert_eq!(other_len(&m, &o), length, "proto {proto} byte {at} bit {bit:#x}");
                }
            }
            let (flow, not_flow) = meta_variants(&m);
            for (what, o) in flow {
                assert!(!takes(&o, h, 0x12) && !other_len(&o, h), "proto {proto}: {what}");
            }
            for (what, o) in not_flow {
                assert!(takes(&o, h, 0x12), "proto {proto}: {what}");
            }
        }
        let m = Meta { l3_off: 14, ..Meta::default() };
        let mut l3 = [0u8; 60];
        l3[0] = 0x60;
        for (what, proto, len) in [("hop-by-hop", 0, 60), ("fragment", 44, 60), ("TCP cut", 6, 53), ("short", 17, 47)] {
            l3[6] = proto;
            assert!(Pattern6::of(&m, &l3[..len]).is_none(), "{what}");
        }
        l3[0] = 0x40;
        l3[6] = 17;
        assert!(Pattern6::of(&m, &l3).is_none(), "version 4");
    }
}
