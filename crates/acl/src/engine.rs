//! The decomposition classifier (one per address family).
//!
//! Compilation, in the spirit of RFC (Gupta & McKeown, "Packet
//! classification on multiple fields", SIGCOMM 1999):
//!
//! 1. Only fields some rule constrains are looked at ("active" fields).
//! 2. Per active field, the domain is cut into elementary intervals at rule
//!    boundaries; intervals matched by the same set of rules form one
//!    equivalence class. An [`IntervalMap`] maps a value to its class
//!    (a 1-3 access trie walk for IPv4 addresses, one or two for the
//!    others).
//! 3. Classes of two chunks of fields are combined by a cross-product
//!    table `t[a * nb + b]` into the classes of the union, greedily picking
//!    the pair with the smallest table while it fits
//!    [`CompileOptions::table_budget`]. Every class's rule set is cut after
//!    the first terminal rule whose constrained fields all lie in the chunk:
//!    later rules can never decide, and the cut merges many classes.
//! 4. If one chunk remains, its class indexes a table of final verdicts
//!    (with the list of count-only rules hit). Otherwise, the chunk whose
//!    classes have the shortest rule lists is kept and each class gives an
//!    ordered candidate list; the candidates' remaining fields are checked
//!    on the packet's values, first terminal match wins.
//!
//! Per packet: one interval-map lookup per active field, one table read per
//! combination, one verdict read (or a short candidate walk). The cost
//! depends on how many fields the rules use, not on how many rules there
//! are, except for the candidate walk of large, overlapping rule sets.
//!
//! Measured, ClassBench-like random rules (`synth::classbench`), packets
//! aimed at the rules (`synth::packets`), batches of 256. Instructions per
//! packet from `valgrind --tool=cachegrind` on tern-bench's `benches/acl_loop` (exact,
//! independent of machine load); ns per packet the minimum of 300 runs of
//! tern-bench's `benches/acl_cycles` on the 2-vCPU Xeon @ 2.8 GHz test VM while other
//! builds kept its load average near 10 (so an upper bound):
//!
//! | rules | v4 instr/pkt batch (single) | v4 ns batch | v6 instr/pkt batch | mode |
//! |---|---|---|---|---|
//! | 100GE `50fw`, one flow | 50 (87) | 3.0 | | table, 1 field |
//! | drop test (50 port ranges) | 113 (234) | 7.3 | | table, 2 fields |
//! | 1 | 243 (340) | 25 | 171 | bitmap, 4 fields |
//! | 50 | 328 (437) | 36 | 480 | bitmap, 6 fields |
//! | 1,000 | 205 (358) | 26 | 369 | candidates, mean list 1.5 |
//! | 10,000 | 446 (594) | 55-72 | 538 | candidates, mean list 5.2 |
//!
//! The linear reference scan costs 384 ns for the 50 rules and grows
//! linearly (about 36 us per packet at 1,000 rules). Choices this measured:
//! bitmap mode beats the cross-product chain for small sets (347 vs 422
//! instructions at 50 rules: independent lookups, no dependent table
//! loads); growing the candidate chunk with the large tables instead of
//! combining the globally cheapest pair cut the 10,000-rule lists from 12.4
//! to 5.2 candidates and the compile time from 4.2 s to 0.9 s; a 4M-entry
//! table budget (16 MiB per table) is where 10,000 rules compile in about
//! a second into 7 MiB (IPv4) / 10 MiB (IPv6) of tables.

use std::collections::HashMap;

use crate::bits::Bits;
use crate::classifier::{COUNTS_DYNAMIC, CompileOptions, Verdict};
use crate::imap::IntervalMap;
use crate::key::PacketKey;
use crate::lower::{Field, LRule, NF};
use crate::rule::{Action, RuleAction};

/// Shape and size of one family's compiled tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// "constant", "table", "candidates" or "linear".
    pub mode: &'static str,
    /// Rules that can match this family.
    pub rules: usize,
    /// Active fields and their number of equivalence classes.
    pub fields: Vec<(&'static str, usize)>,
    /// Cross-product tables built (entries each).
    pub tables: Vec<usize>,
    /// Candidate mode: classes and the mean / longest candidate list.
    pub candidate_classes: usize,
    pub candidates_mean_x100: usize,
    pub candidates_max: usize,
    /// Bytes of lookup tables.
    pub memory_bytes: usize,
}

enum FieldMap {
    Narrow(IntervalMap<u32>),
    Wide(IntervalMap<u128>),
}

struct Lookup {
    field: Field,
    map: FieldMap,
}

impl Lookup {
    #[inline(always)]
    fn class(&self, key: &PacketKey) -> u32 {
        match &self.map {
            FieldMap::Narrow(m) => m.lookup(self.field.value32(key)),
            FieldMap::Wide(m) => m.lookup(self.field.value(key)),
        }
    }
    /// Classes of a group of packets; the dispatch on the field happens
    /// once per group, the loops are monomorphic.
    fn batch(&self, keys: &[PacketKey], out: &mut [u32; GROUP]) {
        let n = keys.len().min(GROUP);
        macro_rules! each {
            ($m:expr, $get:expr) => {
                for i in 0..n {
                    out[i] = $m.lookup($get(&keys[i]));
                }
            };
        }
        match &self.map {
            FieldMap::Wide(m) => match self.field {
                Field::Src => each!(m, |k: &PacketKey| k.src),
                _ => each!(m, |k: &PacketKey| k.dst),
            },
            FieldMap::Narrow(m) => match self.field {
                Field::Src => each!(m, |k: &PacketKey| k.src as u32),
                Field::Dst => each!(m, |k: &PacketKey| k.dst as u32),
                Field::Proto => each!(m, |k: &PacketKey| k.proto as u32),
                Field::InIf => each!(m, |k: &PacketKey| k.in_if as u32),
                Field::OutIf => each!(m, |k: &PacketKey| k.out_if as u32),
                Field::Vlan => each!(m, |k: &PacketKey| k.vlan as u32),
                Field::Dscp => each!(m, |k: &PacketKey| k.dscp as u32),
                Field::Sport => each!(m, |k: &PacketKey| Field::Sport.value32(k)),
                Field::Dport => each!(m, |k: &PacketKey| Field::Dport.value32(k)),
                Field::Icmp => each!(m, |k: &PacketKey| Field::Icmp.value32(k)),
                Field::TcpFlags => each!(m, |k: &PacketKey| Field::TcpFlags.value32(k)),
            },
        }
    }
}

struct Step {
    a: usize,
    b: usize,
    nb: usize,
    table: Box<[u32]>,
}

/// A residual condition of a candidate rule: `field` in one of
/// `intervals[start..start + n]`.
struct Check {
    /// The first (usually only) interval, inline.
    lo: u128,
    hi: u128,
    field: u8,
    start: u32,
    n: u32,
}

struct Cand {
    idx: u32,
    action: RuleAction,
    checks: (u32, u32),
}

enum Tail {
    /// Final class -> verdict.
    Table { verdicts: Box<[Verdict]>, count_lists: Vec<Box<[u32]>> },
    /// Final class -> candidate rules, checked in order.
    Candidates {
        index: Box<[(u32, u32)]>,
        list: Box<[u32]>,
        cands: Box<[Cand]>,
        checks: Box<[Check]>,
        intervals: Box<[(u128, u128)]>,
    },
}

/// Most slots (lookups + steps) a program can have.
const MAX_SLOTS: usize = 2 * NF;

/// Packets classified together by [`Engine::classify_batch`].
const GROUP: usize = 32;

pub(crate) struct Engine {
    default: Action,
    lookups: Vec<Lookup>,
    steps: Vec<Step>,
    tail: Tail,
    /// Length - 1 of the verdict table (a power of two) in table mode.
    vmask: usize,
    /// Small rule sets: per-field rule bitmaps ANDed instead of tables.
    bitmap: Option<BitTail>,
    stats: EngineStats,
}

/// Bitmap mode (at most [`BITMAP_WORDS`] x 64 rules): each field's class
/// has the bitmap of rules it allows; the packet's rules are the AND over
/// its fields, the decision is the lowest terminal bit. No cross-product
/// chain: the field lookups are independent and run in parallel.
struct BitTail {
    /// Per lookup: class -> rule bitmap.
    masks: Vec<Box<[[u64; BITMAP_WORDS]]>>,
    terminal: [u64; BITMAP_WORDS],
    count: [u64; BITMAP_WORDS],
    /// Per rule position: its verdict (terminal rules) and global index.
    verdicts: Box<[Verdict]>,
    idx: Box<[u32]>,
    words: usize,
}

const BITMAP_WORDS: usize = 4;

impl BitTail {
    #[inline(always)]
    fn decide<const W: usize>(&self, acc: &[u64; W], default: Action) -> Verdict {
        let mut below_counts = false;
        for (w, (&a, (&term, &cnt))) in acc.iter().zip(self.terminal.iter().zip(&self.count)).enumerate() {
            let t = a & term;
            let c = a & cnt;
            if t != 0 {
                let bit = t.trailing_zeros();
                let i = w * 64 + bit as usize;
                below_counts |= c & ((1u64 << bit) - 1) != 0;
                let v = self.verdicts.get(i).copied().unwrap_or(Verdict::new(default, None, 0));
                return Verdict::new(v.action, v.rule, if below_counts { COUNTS_DYNAMIC } else { 0 });
            }
            below_counts |= c != 0;
        }
        Verdict::new(default, None, if below_counts { COUNTS_DYNAMIC } else { 0 })
    }
}

/// How a chunk's classes are computed at run time.
enum Recipe {
    Field(usize),
    Pair(Box<Recipe>, Box<Recipe>, usize, Box<[u32]>),
}

struct Chunk {
    mask: u16,
    classes: Vec<Bits>,
    recipe: Recipe,
}

struct Ctx<'a> {
    rules: &'a [LRule],
    words: usize,
    masks: Vec<u16>,
}

impl Ctx<'_> {
    /// Terminal rules whose constrained fields all lie in `mask`.
    fn stop_set(&self, mask: u16) -> Vec<u64> {
        let mut w = vec![0u64; self.words];
        for (i, r) in self.rules.iter().enumerate() {
            if r.action != RuleAction::Count && self.masks[i] & !mask == 0 {
                w[i / 64] |= 1 << (i % 64);
            }
        }
        w
    }
}

fn intern(map: &mut HashMap<Bits, u32>, classes: &mut Vec<Bits>, b: Bits) -> u32 {
    if let Some(&id) = map.get(&b) {
        return id;
    }
    let id = classes.len() as u32;
    classes.push(b.clone());
    map.insert(b, id);
    id
}

impl Engine {
    pub(crate) fn build(rules: &[LRule], v6: bool, default: Action, opts: &CompileOptions) -> Self {
        let m = rules.len();
        let words = m.div_ceil(64).max(1);
        let ctx = Ctx { rules, words, masks: rules.iter().map(LRule::mask).collect() };
        let mut stats = EngineStats { rules: m, ..Default::default() };

        // Phase 0: one chunk per active field.
        let mut fields: Vec<(Field, Vec<u128>, Vec<u32>)> = Vec::new();
        let mut chunks: Vec<Chunk> = Vec::new();
        for f in crate::lower::FIELDS {
            if !rules.iter().any(|r| r.conds[f as usize].is_some()) {
                continue;
            }
            let (starts, cls, classes) = field_classes(&ctx, f, v6);
            stats.fields.push((f.name(), classes.len()));
            let i = fields.len();
            fields.push((f, starts, cls));
            chunks.push(Chunk { mask: 1 << f as u16, classes, recipe: Recipe::Field(i) });
        }
        if chunks.is_empty() {
            // No active field: every packet of the family is in one class.
            let all: Vec<u64> = {
                let mut w = vec![0u64; words];
                for i in 0..m {
                    w[i / 64] |= 1 << (i % 64);
                }
                w
            };
            let b = Bits::from_words(all).cut(&ctx.stop_set(0), words);
            chunks.push(Chunk { mask: 0, classes: vec![b], recipe: Recipe::Field(usize::MAX) });
        }

        // One or two fields: the table path (no step, or one) is cheaper
        // than a bitmap (measured: 50 vs 68 instructions per packet for the
        // 50-rule scenario, 123 vs 140 for the drop test); from three
        // fields on the bitmap's independent lookups win (347 vs 373 at 50
        // ClassBench-like rules).
        if m <= opts.bitmap_rules.min(BITMAP_WORDS * 64) && fields.len() >= 3 {
            return Self::build_bitmap(&ctx, v6, default, fields, chunks, stats);
        }

        // Phase 1: combine the cheapest pair while its table is small
        // (cheap, and it shrinks the many small fields into one chunk).
        // Phase 2: grow the chunk with the shortest candidate lists, the one
        // the tail will read, with its cheapest partner while the table
        // fits the budget, so every large table built serves the tail.
        let small = (opts.table_budget / 16).max(1);
        let mean = |c: &Chunk| c.classes.iter().map(Bits::count).sum::<usize>() as f64 / c.classes.len().max(1) as f64;
        while chunks.len() > 1 {
            let mut best: Option<(usize, usize, usize)> = None;
            let focus = chunks.iter().enumerate().min_by(|x, y| mean(x.1).total_cmp(&mean(y.1))).map_or(0, |x| x.0);
            for i in 0..chunks.len() {
                for j in i + 1..chunks.len() {
                    let p = chunks[i].classes.len().saturating_mul(chunks[j].classes.len());
                    let fits = p <= small || ((i == focus || j == focus) && p <= opts.table_budget);
                    if fits && best.is_none_or(|(_, _, bp)| p < bp) {
                        best = Some((i, j, p));
                    }
                }
            }
            let Some((i, j, _)) = best else { break };
            let b = chunks.remove(j);
            let a = chunks.remove(i);
            let mask = a.mask | b.mask;
            let stop = ctx.stop_set(mask);
            let mut map = HashMap::new();
            let mut classes = Vec::new();
            let mut table = Vec::with_capacity(a.classes.len() * b.classes.len());
            for ca in &a.classes {
                for cb in &b.classes {
                    let r = ca.and_cut(cb, &stop, words);
                    table.push(intern(&mut map, &mut classes, r));
                }
            }
            stats.tables.push(table.len());
            let nb = b.classes.len();
            chunks.push(Chunk {
                mask,
                classes,
                recipe: Recipe::Pair(Box::new(a.recipe), Box::new(b.recipe), nb, table.into()),
            });
        }

        // The chunk the tail reads: the only one, or the one with the
        // shortest candidate lists.
        let tail_chunk = if chunks.len() == 1 {
            chunks.swap_remove(0)
        } else {
            let (k, _) =
                chunks.iter().enumerate().min_by(|x, y| mean(x.1).total_cmp(&mean(y.1))).unwrap_or((0, &chunks[0]));
            chunks.swap_remove(k)
        };
        let complete = chunks.is_empty();

        // Emit the run-time program of the tail chunk.
        let mut lookups = Vec::new();
        let mut steps = Vec::new();
        let mut field_maps: Vec<Option<FieldMap>> = fields
            .iter()
            .map(|(f, starts, cls)| {
                Some(if v6 && matches!(f, Field::Src | Field::Dst) {
                    FieldMap::Wide(IntervalMap::build(f.bits(v6), starts, cls))
                } else {
                    FieldMap::Narrow(IntervalMap::build(f.bits(v6), starts, cls))
                })
            })
            .collect();
        let mut fields_order: Vec<(Field, FieldMap)> = Vec::new();
        let Chunk { mask: tail_mask, classes: tail_classes, recipe: tail_recipe } = tail_chunk;
        emit(tail_recipe, &fields, &mut field_maps, &mut fields_order, &mut steps);
        // Lookups occupy slots 0..L; renumber step operands accordingly.
        let nl = fields_order.len();
        for (f, map) in fields_order {
            lookups.push(Lookup { field: f, map });
        }
        let steps: Vec<Step> =
            steps.into_iter().map(|(a, b, nb, table)| Step { a: a.resolve(nl), b: b.resolve(nl), nb, table }).collect();

        let tail = if complete {
            stats.mode = if lookups.is_empty() { "constant" } else { "table" };
            table_tail(&ctx, &tail_classes, default)
        } else {
            stats.mode = "candidates";
            cand_tail(&ctx, tail_mask, &tail_classes, &mut stats)
        };

        let mut mem = 0;
        for l in &lookups {
            mem += match &l.map {
                FieldMap::Narrow(m) => m.memory_bytes(),
                FieldMap::Wide(m) => m.memory_bytes(),
            };
        }
        mem += steps.iter().map(|s| s.table.len() * 4).sum::<usize>();
        mem += match &tail {
            Tail::Table { verdicts, count_lists } => {
                verdicts.len() * std::mem::size_of::<Verdict>()
                    + count_lists.iter().map(|l| l.len() * 4 + 16).sum::<usize>()
            }
            Tail::Candidates { index, list, cands, checks, intervals } => {
                index.len() * 8
                    + list.len() * 4
                    + cands.len() * std::mem::size_of::<Cand>()
                    + checks.len() * std::mem::size_of::<Check>()
                    + intervals.len() * 32
            }
        };
        stats.memory_bytes = mem;
        let vmask = match &tail {
            Tail::Table { verdicts, .. } => verdicts.len().saturating_sub(1),
            Tail::Candidates { .. } => 0,
        };
        Engine { default, lookups, steps, tail, vmask, bitmap: None, stats }
    }

    fn build_bitmap(
        ctx: &Ctx,
        v6: bool,
        default: Action,
        fields: Vec<(Field, Vec<u128>, Vec<u32>)>,
        chunks: Vec<Chunk>,
        mut stats: EngineStats,
    ) -> Self {
        let bit = |i: usize, w: &mut [u64; BITMAP_WORDS]| {
            if let Some(x) = w.get_mut(i / 64) {
                *x |= 1 << (i % 64);
            }
        };
        let mut lookups = Vec::new();
        let mut masks = Vec::new();
        for ((f, starts, cls), chunk) in fields.iter().zip(&chunks) {
            let map = if v6 && matches!(f, Field::Src | Field::Dst) {
                FieldMap::Wide(IntervalMap::build(f.bits(v6), starts, cls))
            } else {
                FieldMap::Narrow(IntervalMap::build(f.bits(v6), starts, cls))
            };
            lookups.push(Lookup { field: *f, map });
            let m: Box<[[u64; BITMAP_WORDS]]> = chunk
                .classes
                .iter()
                .map(|b| {
                    let mut w = [0u64; BITMAP_WORDS];
                    b.for_each(|i| bit(i as usize, &mut w));
                    w
                })
                .collect();
            masks.push(m);
        }
        let (mut terminal, mut count) = ([0u64; BITMAP_WORDS], [0u64; BITMAP_WORDS]);
        for (i, r) in ctx.rules.iter().enumerate() {
            bit(i, if r.action == RuleAction::Count { &mut count } else { &mut terminal });
        }
        let verdicts =
            ctx.rules.iter().map(|r| Verdict::new(r.action.terminal().unwrap_or(default), Some(r.idx), 0)).collect();
        let idx = ctx.rules.iter().map(|r| r.idx).collect();
        stats.mode = "bitmap";
        let mut mem = masks.iter().map(|m| m.len() * 32).sum::<usize>();
        for l in &lookups {
            mem += match &l.map {
                FieldMap::Narrow(m) => m.memory_bytes(),
                FieldMap::Wide(m) => m.memory_bytes(),
            };
        }
        stats.memory_bytes = mem;
        let words = ctx.rules.len().div_ceil(64).max(1);
        let bitmap = Some(BitTail { masks, terminal, count, verdicts, idx, words });
        // Unused in bitmap mode; one entry keeps every index in range.
        let tail =
            Tail::Table { verdicts: Box::new([Verdict::new(default, None, 0)]), count_lists: vec![Box::new([])] };
        Engine { default, lookups, steps: Vec::new(), tail, vmask: 0, bitmap, stats }
    }

    #[inline(always)]
    fn bitmap_acc<const W: usize>(&self, b: &BitTail, key: &PacketKey) -> [u64; W] {
        let mut acc = [!0u64; W];
        for (l, m) in self.lookups.iter().zip(&b.masks) {
            let row = m.get(l.class(key) as usize).unwrap_or(&[0; BITMAP_WORDS]);
            for w in 0..W {
                acc[w] &= row[w];
            }
        }
        acc
    }

    fn bitmap_batch<const W: usize>(&self, b: &BitTail, keys: &[PacketKey], out: &mut [Verdict]) {
        for (kc, oc) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            let n = kc.len().min(oc.len()).min(GROUP);
            let mut acc = [[!0u64; W]; GROUP];
            let mut cls = [0u32; GROUP];
            for (l, m) in self.lookups.iter().zip(&b.masks) {
                l.batch(kc, &mut cls);
                for i in 0..n {
                    let row = m.get(cls[i] as usize).unwrap_or(&[0; BITMAP_WORDS]);
                    for w in 0..W {
                        acc[i][w] &= row[w];
                    }
                }
            }
            for i in 0..n {
                oc[i] = b.decide::<W>(&acc[i], self.default);
            }
        }
    }

    /// Runs the lookups and steps; returns the tail class.
    #[inline(always)]
    fn final_class(&self, key: &PacketKey) -> u32 {
        match self.lookups.as_slice() {
            [] => return 0,
            [only] if self.steps.is_empty() => return only.class(key),
            _ => {}
        }
        let mut slot = [0u32; MAX_SLOTS];
        for (s, l) in slot.iter_mut().zip(&self.lookups) {
            *s = l.class(key);
        }
        let nl = self.lookups.len();
        for (i, st) in self.steps.iter().enumerate() {
            let a = slot.get(st.a).copied().unwrap_or(0) as usize;
            let b = slot.get(st.b).copied().unwrap_or(0) as usize;
            let v = st.table.get(a * st.nb + b).copied().unwrap_or(0);
            if let Some(s) = slot.get_mut(nl + i) {
                *s = v;
            }
        }
        let last = if self.steps.is_empty() { nl.saturating_sub(1) } else { nl + self.steps.len() - 1 };
        slot.get(last).copied().unwrap_or(0)
    }

    #[inline]
    pub(crate) fn classify(&self, key: &PacketKey) -> Verdict {
        if let Some(b) = &self.bitmap {
            return match b.words {
                1 => b.decide::<1>(&self.bitmap_acc::<1>(b, key), self.default),
                2 => b.decide::<2>(&self.bitmap_acc::<2>(b, key), self.default),
                _ => b.decide::<4>(&self.bitmap_acc::<4>(b, key), self.default),
            };
        }
        let c = self.final_class(key);
        self.tail_verdict(c, key)
    }

    #[inline(always)]
    fn tail_verdict(&self, c: u32, key: &PacketKey) -> Verdict {
        match &self.tail {
            // In range: padded to a power of two, `vmask` = length - 1.
            Tail::Table { verdicts, .. } => verdicts[c as usize & self.vmask],
            Tail::Candidates { index, list, cands, checks, intervals } => {
                let (start, n) = index.get(c as usize).copied().unwrap_or((0, 0));
                let mut counted = 0;
                for &ci in list.get(start as usize..(start + n) as usize).unwrap_or(&[]) {
                    let Some(cand) = cands.get(ci as usize) else {
                        continue;
                    };
                    if !cand_matches(cand, checks, intervals, key) {
                        continue;
                    }
                    match cand.action.terminal() {
                        Some(a) => return Verdict::new(a, Some(cand.idx), counted),
                        None => counted = COUNTS_DYNAMIC,
                    }
                }
                Verdict::new(self.default, None, counted)
            }
        }
    }

    /// Batch classification, field by field over groups of [`GROUP`]
    /// packets: each inner loop does one independent lookup per packet, so
    /// the CPU keeps several packets' memory accesses in flight (the
    /// per-packet path waits for each dependent load in turn). The slot
    /// array is sized for the program (const generic) so no time goes to
    /// zeroing unused slots.
    pub(crate) fn classify_batch(&self, keys: &[PacketKey], out: &mut [Verdict]) {
        if let Some(b) = &self.bitmap {
            return match b.words {
                1 => self.bitmap_batch::<1>(b, keys, out),
                2 => self.bitmap_batch::<2>(b, keys, out),
                _ => self.bitmap_batch::<4>(b, keys, out),
            };
        }
        match self.lookups.len() + self.steps.len() {
            0 | 1 => self.batch_n::<1>(keys, out),
            2 => self.batch_n::<2>(keys, out),
            3 => self.batch_n::<3>(keys, out),
            4 => self.batch_n::<4>(keys, out),
            5..=8 => self.batch_n::<8>(keys, out),
            9..=14 => self.batch_n::<14>(keys, out),
            _ => self.batch_n::<MAX_SLOTS>(keys, out),
        }
    }

    fn batch_n<const S: usize>(&self, keys: &[PacketKey], out: &mut [Verdict]) {
        let nl = self.lookups.len();
        let last = if self.steps.is_empty() { nl.saturating_sub(1) } else { nl + self.steps.len() - 1 };
        for (kc, oc) in keys.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            let mut slots = [[0u32; GROUP]; S];
            for (l, s) in self.lookups.iter().zip(slots.iter_mut()) {
                l.batch(kc, s);
            }
            for (i, st) in self.steps.iter().enumerate() {
                let (Some(a), Some(b)) = (slots.get(st.a).copied(), slots.get(st.b).copied()) else { continue };
                let Some(o) = slots.get_mut(nl + i) else { continue };
                for ((o, &a), &b) in o.iter_mut().zip(a.iter()).zip(b.iter()).take(kc.len()) {
                    *o = st.table.get(a as usize * st.nb + b as usize).copied().unwrap_or(0);
                }
            }
            let fin = slots.get(last).copied().unwrap_or([0; GROUP]);
            match &self.tail {
                Tail::Table { verdicts, .. } => {
                    let n = kc.len().min(oc.len()).min(GROUP);
                    for i in 0..n {
                        // Class ids come from our own tables and are < len;
                        // the fallback only guards against a compiler bug.
                        // In range: the table is padded to a power of two
                        // and `vmask` is its length - 1.
                        oc[i] = verdicts[fin[i] as usize & self.vmask];
                    }
                }
                Tail::Candidates { .. } => {
                    // An explicit prefetch pass over the group's index and
                    // list entries was tried: no difference measurable on
                    // the 2-core test machine (10,000 rules, 2 runs each,
                    // within run-to-run noise), so the walk stays plain.
                    for ((o, k), &c) in oc.iter_mut().zip(kc).zip(fin.iter()) {
                        *o = self.tail_verdict(c, k);
                    }
                }
            }
        }
    }

    pub(crate) fn count_hits(&self, key: &PacketKey, v: &Verdict, f: &mut dyn FnMut(u32)) {
        if let Some(b) = &self.bitmap {
            let acc = self.bitmap_acc::<BITMAP_WORDS>(b, key);
            for (w, &a) in acc.iter().enumerate() {
                let mut x = a & (b.count[w] | b.terminal[w]);
                while x != 0 {
                    let i = w * 64 + x.trailing_zeros() as usize;
                    x &= x - 1;
                    if b.terminal[w] >> (i % 64) & 1 == 1 {
                        return;
                    }
                    if let Some(&g) = b.idx.get(i) {
                        f(g);
                    }
                }
            }
            return;
        }
        match &self.tail {
            Tail::Table { count_lists, .. } => {
                if let Some(l) = count_lists.get(v.counts as usize) {
                    l.iter().for_each(|&r| f(r));
                }
            }
            Tail::Candidates { index, list, cands, checks, intervals } => {
                let c = self.final_class(key);
                let (start, n) = index.get(c as usize).copied().unwrap_or((0, 0));
                for &ci in list.get(start as usize..(start + n) as usize).unwrap_or(&[]) {
                    let Some(cand) = cands.get(ci as usize) else {
                        continue;
                    };
                    if !cand_matches(cand, checks, intervals, key) {
                        continue;
                    }
                    if cand.action.terminal().is_some() {
                        return;
                    }
                    f(cand.idx);
                }
            }
        }
    }

    pub(crate) fn stats(&self) -> EngineStats {
        self.stats.clone()
    }
}

#[inline(always)]
fn cand_matches(c: &Cand, checks: &[Check], intervals: &[(u128, u128)], key: &PacketKey) -> bool {
    let (start, n) = c.checks;
    for ch in checks.get(start as usize..(start + n) as usize).unwrap_or(&[]) {
        let v = crate::lower::FIELDS.get(ch.field as usize).map_or(0, |f| f.value(key));
        if ch.lo <= v && v <= ch.hi {
            continue;
        }
        if ch.n <= 1 {
            return false;
        }
        let iv = intervals.get(ch.start as usize..(ch.start + ch.n) as usize).unwrap_or(&[]);
        if !iv.iter().any(|&(lo, hi)| lo <= v && v <= hi) {
            return false;
        }
    }
    true
}

/// A step operand: a lookup (by its position in emission order) or the
/// output of an earlier step.
#[derive(Clone, Copy)]
enum Operand {
    Lookup(usize),
    Step(usize),
}

impl Operand {
    fn resolve(self, nl: usize) -> usize {
        match self {
            Operand::Lookup(i) => i,
            Operand::Step(j) => nl + j,
        }
    }
}

type StepSpec = (Operand, Operand, usize, Box<[u32]>);

fn emit(
    r: Recipe,
    fields: &[(Field, Vec<u128>, Vec<u32>)],
    maps: &mut [Option<FieldMap>],
    order: &mut Vec<(Field, FieldMap)>,
    steps: &mut Vec<StepSpec>,
) -> Option<Operand> {
    match r {
        Recipe::Field(i) => {
            let (f, _, _) = fields.get(i)?;
            let map = maps.get_mut(i)?.take()?;
            order.push((*f, map));
            Some(Operand::Lookup(order.len() - 1))
        }
        Recipe::Pair(a, b, nb, table) => {
            let a = emit(*a, fields, maps, order, steps)?;
            let b = emit(*b, fields, maps, order, steps)?;
            steps.push((a, b, nb, table));
            Some(Operand::Step(steps.len() - 1))
        }
    }
}

/// Elementary intervals of field `f` and their classes.
fn field_classes(ctx: &Ctx, f: Field, v6: bool) -> (Vec<u128>, Vec<u32>, Vec<Bits>) {
    let max = f.max(v6);
    let fi = f as usize;
    let mut starts = vec![0u128];
    // (position, rule, is_start)
    let mut events: Vec<(u128, u32, bool)> = Vec::new();
    let mut base = vec![0u64; ctx.words];
    for (i, r) in ctx.rules.iter().enumerate() {
        match &r.conds[fi] {
            None => base[i / 64] |= 1 << (i % 64),
            Some(iv) => {
                for &(lo, hi) in iv {
                    starts.push(lo);
                    events.push((lo, i as u32, true));
                    if hi < max {
                        starts.push(hi + 1);
                        events.push((hi + 1, i as u32, false));
                    }
                }
            }
        }
    }
    starts.sort_unstable();
    starts.dedup();
    events.sort_unstable_by_key(|e| (e.0, e.2));
    let stop = ctx.stop_set(1 << fi as u16);
    let mut cur = base;
    let mut map = HashMap::new();
    let mut classes = Vec::new();
    let mut cls = Vec::with_capacity(starts.len());
    let mut e = 0;
    for &s in &starts {
        while let Some(&(pos, r, is_start)) = events.get(e) {
            if pos > s {
                break;
            }
            let (w, b) = (r as usize / 64, r % 64);
            if is_start {
                cur[w] |= 1 << b;
            } else {
                cur[w] &= !(1 << b);
            }
            e += 1;
        }
        let b = Bits::from_words(cur.clone()).cut(&stop, ctx.words);
        cls.push(intern(&mut map, &mut classes, b));
    }
    (starts, cls, classes)
}

fn table_tail(ctx: &Ctx, classes: &[Bits], default: Action) -> Tail {
    let mut lists: Vec<Box<[u32]>> = vec![Box::new([])];
    let mut list_ids: HashMap<Vec<u32>, u32> = HashMap::new();
    let verdicts = classes
        .iter()
        .map(|b| {
            let mut counted = Vec::new();
            let mut decided: Option<(Action, u32)> = None;
            b.for_each(|i| {
                if decided.is_some() {
                    return;
                }
                let Some(r) = ctx.rules.get(i as usize) else {
                    return;
                };
                match r.action.terminal() {
                    Some(a) => decided = Some((a, r.idx)),
                    None => counted.push(r.idx),
                }
            });
            let counts = if counted.is_empty() {
                0
            } else {
                *list_ids.entry(counted.clone()).or_insert_with(|| {
                    lists.push(counted.into());
                    lists.len() as u32 - 1
                })
            };
            match decided {
                Some((a, idx)) => Verdict::new(a, Some(idx), counts),
                None => Verdict::new(default, None, counts),
            }
        })
        .collect::<Vec<_>>();
    // Pad to a power of two so the batch path can index with a mask.
    let mut verdicts = verdicts;
    let len = verdicts.len().next_power_of_two();
    verdicts.resize(len, Verdict::new(default, None, 0));
    let verdicts = verdicts.into_boxed_slice();
    Tail::Table { verdicts, count_lists: lists }
}

fn cand_tail(ctx: &Ctx, mask: u16, classes: &[Bits], stats: &mut EngineStats) -> Tail {
    let mut checks = Vec::new();
    let mut intervals = Vec::new();
    let cands: Box<[Cand]> = ctx
        .rules
        .iter()
        .map(|r| {
            let start = checks.len() as u32;
            for f in crate::lower::FIELDS {
                if mask & (1 << f as u16) != 0 {
                    continue;
                }
                if let Some(iv) = &r.conds[f as usize] {
                    let (lo, hi) = iv.first().copied().unwrap_or((1, 0));
                    checks.push(Check { lo, hi, field: f as u8, start: intervals.len() as u32, n: iv.len() as u32 });
                    intervals.extend_from_slice(iv);
                }
            }
            Cand { idx: r.idx, action: r.action, checks: (start, checks.len() as u32 - start) }
        })
        .collect();
    let mut index = Vec::with_capacity(classes.len());
    let mut list = Vec::new();
    for b in classes {
        let start = list.len() as u32;
        b.for_each(|i| list.push(i));
        index.push((start, list.len() as u32 - start));
    }
    stats.candidate_classes = index.len();
    stats.candidates_max = index.iter().map(|x| x.1 as usize).max().unwrap_or(0);
    stats.candidates_mean_x100 = list.len() * 100 / index.len().max(1);
    Tail::Candidates {
        index: index.into(),
        list: list.into(),
        cands,
        checks: checks.into(),
        intervals: intervals.into(),
    }
}
