//! The verdict cache: the one owner of "the last verdict a rule set gave a
//! flow", for a forwarding path that would rather not ask the rule set
//! again for that flow's next packets.
//!
//! A rule set is stateless, so its verdict is a function of the packet's
//! [`PacketKey`] and of the tables the key was classified under. A cached
//! verdict stands in for a classification on three invariants, which every
//! user of [`VerdictCache`] (tern's input and output shortcuts, the XDP
//! lane's verdict cache and forwarding memo) states against the same
//! terms:
//!
//! 1. **Key coverage.** The flow's pattern `P` (the packed form its user
//!    compares, header bytes and metadata under masks) takes a packet only
//!    when the packet's key equals the flow's in every field of
//!    [`PacketKey::FIELDS`]. The list is generated from the struct, so a
//!    new key field appears in it by itself; the users' tests flip every
//!    header bit and metadata field, work out which key fields changed
//!    with the reference key builder, and require a miss whenever one did
//!    and that every field of the list was reached (`tern-nodes`:
//!    `cached_verdicts_see_every_key_field`).
//! 2. **Invalidation (the one rule).** An entry is tagged with the
//!    [`Generation`] it was learnt under: the generations of the rule
//!    table and of the interface table (bindings, which set an interface
//!    uses), each bumped by any publish of that table. It answers only
//!    while both are the current ones ([`VerdictCache::start`]); any rule
//!    or interface change makes it dead from the next batch on, before a
//!    packet is compared. Routes need no tag: an output entry keeps its
//!    transmitting interface (`out_if`), which its user compares.
//! 3. **What is kept.** Only accepts that no count-only rule saw
//!    ([`Verdict::counted`]): a cached packet's counters are its deciding
//!    rule's (or the default's) alone, added in bulk
//!    ([`VerdictCache::finish`]), so per-rule hit counts stay exact, and a
//!    packet the cache does not take still meets the rule set, which drops
//!    or counts it.
//!
//! A packet the cache took is traced with [`VerdictCache::note`] ("acl
//! NAME: cached verdict, rule 7"), so a trace shows the path it took.

use crate::{Action, Classifier, PacketKey, RuleCounters};

/// What a cached verdict was learnt under: the generation of the rule
/// table and of the interface table (the module's invalidation rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Generation {
    pub rules: u64,
    pub ifs: u64,
}

/// A flow's cached accept: its pattern, its rule set and deciding rule,
/// the length of the packet it was learnt from, the transmitting
/// interface (output rule sets; 0 for input ones), and the tables'
/// generation.
#[derive(Clone, Copy, Debug)]
pub struct Entry<P> {
    pub pattern: P,
    pub set: u16,
    pub rule: Option<u32>,
    pub len: u16,
    pub out_if: u16,
    pub generation: Generation,
}

/// The last accepted flow of a rule set for one forwarding path (module
/// docs): the entry the current batch answers from, and one learnt during
/// the batch, which answers from the next. `P` is the path's pattern;
/// `none` (given to [`VerdictCache::new`]) a pattern that takes no packet.
#[derive(Clone, Debug)]
pub struct VerdictCache<P> {
    none: P,
    entry: Entry<P>,
    /// Whether `entry` answers (learnt and not invalidated since).
    live: bool,
    learnt: Option<Entry<P>>,
    /// Taken since the last [`VerdictCache::finish`] besides the hits its
    /// caller counts: packets at other lengths, and their bytes.
    others: u64,
    bytes: u64,
}

impl<P: Copy> VerdictCache<P> {
    /// An empty cache; `none` is the pattern that takes no packet.
    pub fn new(none: P) -> Self {
        let entry = Entry { pattern: none, set: 0, rule: None, len: 0, out_if: 0, generation: Generation::default() };
        VerdictCache { none, entry, live: false, learnt: None, others: 0, bytes: 0 }
    }

    /// At the start of a batch, under the tables' generation `now`: takes
    /// the entry learnt during the last batch, drops an entry of another
    /// generation (the invalidation rule); the pattern the batch compares
    /// (`none` when no entry answers).
    #[inline]
    pub fn start(&mut self, now: Generation) -> P {
        if let Some(e) = self.learnt.take() {
            self.entry = e;
            self.live = true;
        }
        if self.entry.generation != now {
            self.entry.pattern = self.none;
            self.live = false;
        }
        self.entry.pattern
    }

    /// Forgets every entry (the fast path switched off: once it is back
    /// on, the cache starts from what it learns then).
    #[inline]
    pub fn forget(&mut self) {
        self.entry.pattern = self.none;
        self.learnt = None;
        self.live = false;
    }

    /// Whether an entry answers this batch.
    #[inline(always)]
    pub fn live(&self) -> bool {
        self.live
    }

    /// The entry this batch answers from (its pattern is `none` when it
    /// does not answer).
    #[inline(always)]
    pub fn entry(&self) -> &Entry<P> {
        &self.entry
    }

    /// Classifies `key` (a packet of `len` bytes, of pattern `pattern`,
    /// bound to rule set `set` whose classifier is `c`; its `out_if` is
    /// the entry's) and keeps it for the next batch if the set accepts it
    /// and no count-only rule saw it. The packet itself still goes to the
    /// rule set's node, which counts it. Whether it was kept.
    #[cold]
    pub fn learn(
        &mut self,
        now: Generation,
        c: &Classifier,
        key: &PacketKey,
        (pattern, set, len): (P, u16, u16),
    ) -> bool {
        let v = c.classify(key);
        if v.action != Action::Accept || v.counted() {
            return false;
        }
        self.learnt = Some(Entry { pattern, set, rule: v.rule, len, out_if: key.out_if, generation: now });
        true
    }

    /// Counts a packet of `len` bytes that the entry took at a length
    /// other than its own.
    #[inline]
    pub fn take_other_len(&mut self, len: u16) {
        self.others += 1;
        self.bytes += u64::from(len);
    }

    /// At the end of a batch: adds what the entry took (`hits` at its own
    /// length, counted by the caller, plus those of
    /// [`VerdictCache::take_other_len`]) to its rule on `counters` (the
    /// worker's of the entry's set); the packets taken since the last
    /// call.
    #[inline]
    pub fn finish(&mut self, counters: Option<&RuleCounters>, hits: u64) -> u64 {
        let others = std::mem::take(&mut self.others);
        let bytes = std::mem::take(&mut self.bytes) + hits * u64::from(self.entry.len);
        let taken = hits + others;
        if taken != 0
            && let Some(c) = counters
        {
            c.add_n(self.entry.rule, taken, bytes);
        }
        taken
    }

    /// The trace note of a packet the entry took, its set named `set_name`.
    #[cold]
    pub fn note(&self, set_name: &str) -> String {
        let by = self.entry.rule.map_or_else(|| "default".to_string(), |r| format!("rule {r}"));
        format!("acl {set_name}: cached verdict, {by}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, parse_toml};

    fn classifier(rules: &str) -> Classifier {
        let text = format!("[[acl]]\nname = \"T\"\ndefault = \"accept\"\n{rules}");
        let sets = parse_toml(&text).expect("rules");
        compile(sets.first().expect("set"), &|_| None).expect("compile")
    }

    /// An entry answers from the batch after it was learnt, while both
    /// generations are the ones it was learnt under; a new rule table or
    /// interface table ends it at once, for good.
    #[test]
    fn an_entry_answers_only_under_its_generation() {
        let c = classifier("[[acl.rule]]\naction = \"accept\"\nproto = \"udp\"\n");
        let key = PacketKey::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 17).with_ports(1, 53);
        let g = Generation { rules: 3, ifs: 7 };
        let mut cache = VerdictCache::new(0u32);
        assert_eq!(cache.start(g), 0);
        assert!(cache.learn(g, &c, &key, (42, 0, 60)));
        assert_eq!(cache.start(g), 42, "learnt, answers the next batch");
        assert!(cache.live());
        assert_eq!(cache.start(g), 42, "and the one after");
        for now in [Generation { rules: 4, ..g }, Generation { ifs: 8, ..g }] {
            let mut c2 = cache.clone();
            assert_eq!(c2.start(now), 0, "{now:?}: invalidated");
            assert!(!c2.live());
            assert_eq!(c2.start(g), 0, "{now:?}: not revived");
        }
        // Learnt under an old generation, started under a new one.
        assert!(cache.learn(g, &c, &key, (43, 0, 60)));
        assert_eq!(cache.start(Generation { rules: 4, ..g }), 0);
        cache.forget();
        assert_eq!(cache.start(g), 0, "forgotten");
    }

    /// Only accepts no count-only rule saw are kept; what the entry takes
    /// is counted on its deciding rule, at its own length and others.
    #[test]
    fn keeps_plain_accepts_and_counts_on_the_rule() {
        let c = classifier(
            "[[acl.rule]]\naction = \"drop\"\nproto = \"tcp\"\n\
             [[acl.rule]]\naction = \"count\"\ndport = 99\n\
             [[acl.rule]]\naction = \"accept\"\nproto = \"udp\"\n",
        );
        let g = Generation::default();
        let udp = |dport| PacketKey::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 17).with_ports(1, dport);
        let tcp = PacketKey::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 6).with_ports(1, 53);
        let mut cache = VerdictCache::new(0u8);
        assert!(!cache.learn(g, &c, &tcp, (1, 0, 60)), "a drop");
        assert!(!cache.learn(g, &c, &udp(99), (1, 0, 60)), "counted by a count rule");
        assert!(cache.learn(g, &c, &udp(53), (1, 0, 60)));
        cache.start(g);
        assert_eq!(cache.note("T"), "acl T: cached verdict, rule 2");
        let counters = RuleCounters::for_classifier(&c);
        cache.take_other_len(100);
        assert_eq!(cache.finish(Some(&counters), 3), 4);
        let h = counters.rule(2);
        assert_eq!((h.packets, h.bytes), (4, 3 * 60 + 100));
        assert_eq!(cache.finish(Some(&counters), 0), 0);
        assert_eq!(counters.rule(2).packets, 4);
    }
}
