//! Import of the stateless subset of an nftables ruleset, from the JSON of
//! `nft -j list ruleset` (libnftables-json(5)).
//!
//! Each base chain of type `filter` on hook `input`, `forward` or `output`
//! in a table of family `ip`, `ip6` or `inet` becomes one rule set named
//! `FAMILY_TABLE_CHAIN` (other characters than letters, digits, `_` and `-`
//! become `_`); the chain policy becomes its default. The regular chains it
//! reaches by `jump` and `goto` are inlined (see [`flatten`]): `jump`
//! returns at the chain's end or a `return`, `goto` does not; loops, more
//! than 16 nested jumps and results over [`crate::MAX_RULES`] rules are
//! refused. Regular chains no base chain reaches are left out with a note.
//!
//! Translated: matches on `ip`/`ip6`
//! `saddr`/`daddr` (addresses, prefixes, ranges, anonymous and named sets),
//! `ip protocol` / `meta l4proto`, `tcp`/`udp`/`sctp`/`dccp`/`udplite`/`th`
//! `sport`/`dport` (values, ranges, sets, comparisons), `meta iifname`/
//! `oifname`/`iif`/`oif`, `icmp`/`icmpv6` `type`/`code`, `tcp flags`,
//! `ip`/`ip6 dscp`, `meta nfproto`, with `==`, `!=` (not for interface
//! names), `in`, `<`, `<=`, `>`, `>=`; verdicts `accept`, `drop`, `jump`,
//! `goto`, `return`; `counter` (every tern rule counts; a rule with a
//! counter and no verdict becomes a `count` rule, as does the counter of a
//! jump, goto or return).
//!
//! `ct state` matches are refused by default; with [`CtMode::Stateless`]
//! they are replaced by a stateless approximation, each one noted.
//!
//! Everything else is refused with an error naming the table, chain, rule
//! handle and expression: other connection tracking matches, NAT, log,
//! limit, reject, maps, dynamic sets, other hooks and families, wildcard
//! interface names. A refusal is deliberate: a firewall that silently
//! dropped a `ct state established accept` would lock its users out.
//!
//! Note: nftables' `th dport` reads two bytes of any transport header;
//! tern reads ports only for TCP, UDP, SCTP, UDP-Lite and DCCP.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

use serde_json::Value;

use crate::lower::normalize;
use crate::names;
use crate::rule::{Action, Family, Rule, RuleAction, RuleSet};
use crate::value::{IfName, List, NumRange, Prefix, RangeKind, TcpFlags};

/// An nftables ruleset translated to tern rule sets.
#[derive(Clone, Debug, PartialEq)]
pub struct Import {
    pub sets: Vec<ImportedChain>,
    /// Things the reader must know (chains sharing a hook, no-op rules).
    pub notes: Vec<String>,
}

/// One base chain and the rule set made from it.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportedChain {
    pub family: String,
    pub table: String,
    pub chain: String,
    pub hook: String,
    pub priority: i64,
    pub set: RuleSet,
    /// nftables rule handle of each rule of `set`.
    pub handles: Vec<u64>,
    /// Where each rule of `set` comes from: chain and handle, and the
    /// jumps that led there.
    pub origins: Vec<String>,
}

/// Why a ruleset cannot be imported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportError {
    pub table: Option<String>,
    pub chain: Option<String>,
    pub handle: Option<u64>,
    /// The offending expression, as compact JSON.
    pub expr: Option<String>,
    pub reason: String,
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("nft")?;
        if let Some(t) = &self.table {
            write!(f, " table {t}")?;
        }
        if let Some(c) = &self.chain {
            write!(f, ", chain {c}")?;
        }
        if let Some(h) = self.handle {
            write!(f, ", rule handle {h}")?;
        }
        if let Some(e) = &self.expr {
            write!(f, ", expression {e}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ImportError {}

#[derive(Clone, Default)]
struct Where {
    table: Option<String>,
    chain: Option<String>,
    handle: Option<u64>,
}

impl Where {
    fn err(&self, expr: Option<&Value>, reason: impl Into<String>) -> ImportError {
        ImportError {
            table: self.table.clone(),
            chain: self.chain.clone(),
            handle: self.handle,
            expr: expr.map(|e| e.to_string()),
            reason: reason.into(),
        }
    }
}

struct NamedSet {
    elems: Vec<Value>,
    usable: Result<(), String>,
}

/// Choices for what tern's stateless firewall cannot express exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    pub ct: CtMode,
}

/// What to do with `ct state` matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CtMode {
    /// Refuse the ruleset, naming the rule (the default).
    #[default]
    Refuse,
    /// Replace each state by a stateless approximation: `established` by
    /// TCP with ACK or RST set, `related` by ICMP/ICMPv6 errors, `new` by
    /// TCP with SYN and not ACK or any other protocol, `invalid` and
    /// `untracked` by nothing (the rule never matches). Every approximated
    /// rule is listed in the import's notes.
    Stateless,
}

impl std::str::FromStr for CtMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "refuse" => Ok(CtMode::Refuse),
            "stateless" => Ok(CtMode::Stateless),
            _ => Err(format!("{s:?}: expected refuse or stateless")),
        }
    }
}

/// What a rule does once its conditions match.
#[derive(Clone, Debug, PartialEq)]
pub enum Then {
    /// accept, drop, or count and continue.
    Verdict(RuleAction),
    /// Evaluate the named chain; on its end or `return`, continue here.
    Jump(String),
    /// Evaluate the named chain; on its end or `return`, continue where
    /// this chain would have returned.
    Goto(String),
    /// Leave this chain.
    Return,
}

/// One nftables rule: its conditions as alternatives (any may match;
/// usually one, several for an approximated `ct state`), its effect.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub handle: u64,
    /// Alternatives; each is a rule whose action is ignored.
    pub when: Vec<Rule>,
    pub then: Then,
    /// The rule has a counter (kept on jump, goto and return as a count rule).
    pub counter: bool,
    pub comment: Option<String>,
}

/// A chain of the ruleset, base or regular.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    pub family: String,
    pub table: String,
    pub name: String,
    /// Hook, priority and policy of a base chain.
    pub base: Option<(String, i64, Action)>,
    /// The translated rules, or why one of them cannot be translated (an
    /// error only if the chain is reached from a base chain).
    pub steps: Result<Vec<Step>, ImportError>,
}

/// The ruleset as parsed, before jumps are inlined: what
/// [`evaluate`] interprets, and [`import`] flattens.
#[derive(Clone, Debug, PartialEq)]
pub struct Ruleset {
    pub chains: Vec<Chain>,
    pub notes: Vec<String>,
}

impl Ruleset {
    /// The chain a jump from `from` names (same family and table).
    pub fn target(&self, from: usize, name: &str) -> Option<usize> {
        let f = &self.chains[from];
        self.chains.iter().position(|c| c.family == f.family && c.table == f.table && c.name == name)
    }
}

/// Most nested jumps nftables allows (its jump stack).
pub const MAX_JUMP_DEPTH: usize = 16;

/// The nftables semantics, interpreted directly (jumps, gotos and returns
/// followed with a stack): the reference the flattened rule sets are
/// tested against. Returns the verdict of base chain `base` (its policy
/// when nothing decides); counters are ignored. `None` if a chain on the
/// way could not be translated, a target is missing, or the jumps loop.
pub fn evaluate(
    rs: &Ruleset,
    base: usize,
    ifindex: &dyn Fn(&str) -> Option<u16>,
    key: &crate::PacketKey,
) -> Option<Action> {
    let policy = rs.chains.get(base)?.base.as_ref()?.2;
    let mut stack: Vec<(usize, usize)> = Vec::new();
    let (mut chain, mut pc) = (base, 0usize);
    // Gotos in a loop would never end; nftables refuses such rulesets.
    for _ in 0..MAX_WORK {
        let steps = rs.chains[chain].steps.as_ref().ok()?;
        let Some(st) = steps.get(pc) else {
            // Off the end: back to the caller, or the policy.
            match stack.pop() {
                Some((c, p)) => (chain, pc) = (c, p),
                None => return Some(policy),
            }
            continue;
        };
        pc += 1;
        if !st.when.iter().any(|r| crate::linear::rule_matches(r, ifindex, key)) {
            continue;
        }
        match &st.then {
            Then::Verdict(RuleAction::Accept) => return Some(Action::Accept),
            Then::Verdict(RuleAction::Drop) => return Some(Action::Drop),
            Then::Verdict(RuleAction::Count) => {}
            Then::Jump(t) => {
                let t = rs.target(chain, t)?;
                if stack.len() >= MAX_JUMP_DEPTH {
                    return None;
                }
                stack.push((chain, pc));
                (chain, pc) = (t, 0);
            }
            Then::Goto(t) => (chain, pc) = (rs.target(chain, t)?, 0),
            Then::Return => match stack.pop() {
                Some((c, p)) => (chain, pc) = (c, p),
                None => return Some(policy),
            },
        }
    }
    None
}

/// Imports the JSON of `nft -j list ruleset`, refusing what tern cannot
/// express (see [`import_with`]).
pub fn import(json: &str) -> Result<Import, ImportError> {
    import_with(json, &ImportOptions::default())
}

/// Imports the JSON of `nft -j list ruleset`: parses it ([`parse`]) and
/// inlines the chains each base chain jumps to ([`flatten`]).
pub fn import_with(json: &str, opts: &ImportOptions) -> Result<Import, ImportError> {
    let rs = parse(json, opts)?;
    flatten(&rs)
}

/// Parses the JSON of `nft -j list ruleset` into chains of translated rules.
pub fn parse(json: &str, opts: &ImportOptions) -> Result<Ruleset, ImportError> {
    let top = Where::default();
    let v: Value = serde_json::from_str(json).map_err(|e| top.err(None, format!("not JSON: {e}")))?;
    let items = v
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or_else(|| top.err(None, "no top-level \"nftables\" array (expected the output of nft -j list ruleset)"))?;

    let mut sets: HashMap<(String, String, String), NamedSet> = HashMap::new();
    let mut chains: Vec<Chain> = Vec::new();
    let mut chain_index: HashMap<(String, String, String), usize> = HashMap::new();
    let mut notes = Vec::new();
    let s = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();

    for item in items {
        let Some((kind, o)) = item.as_object().and_then(|m| m.iter().next()) else {
            return Err(top.err(Some(item), "unexpected element"));
        };
        let family = s(o, "family");
        let table = s(o, if kind == "table" { "name" } else { "table" });
        let at = Where { table: Some(format!("{family} {table}")), ..Default::default() };
        match kind.as_str() {
            "metainfo" => {}
            "table" => check_family(&at, &family)?,
            "set" => {
                check_family(&at, &family)?;
                let flags: Vec<&str> = o
                    .get("flags")
                    .and_then(Value::as_array)
                    .map_or(vec![], |a| a.iter().filter_map(Value::as_str).collect());
                let usable = if flags.contains(&"dynamic") || o.get("timeout").is_some() {
                    Err("dynamic sets (updated by the data path or with timeouts) are not supported".to_string())
                } else if o.get("type").is_some_and(Value::is_array) {
                    Err("concatenated set types are not supported".to_string())
                } else {
                    Ok(())
                };
                let elems = o.get("elem").and_then(Value::as_array).cloned().unwrap_or_default();
                sets.insert((family, table, s(o, "name")), NamedSet { elems, usable });
            }
            "chain" => {
                check_family(&at, &family)?;
                let name = s(o, "name");
                let at = Where { chain: Some(name.clone()), ..at };
                let base = match o.get("hook").and_then(Value::as_str) {
                    // A regular chain: reachable only by jump/goto.
                    None => None,
                    Some(hook) => {
                        let ty = s(o, "type");
                        if ty != "filter" {
                            return Err(
                                at.err(Some(item), format!("chain type {ty:?} is not supported (only filter chains)"))
                            );
                        }
                        if !matches!(hook, "input" | "forward" | "output") {
                            return Err(at.err(
                                Some(item),
                                format!("hook {hook:?} is not supported (only input, forward, output)"),
                            ));
                        }
                        let policy = match o.get("policy").and_then(Value::as_str).unwrap_or("accept") {
                            "accept" => Action::Accept,
                            "drop" => Action::Drop,
                            p => return Err(at.err(Some(item), format!("chain policy {p:?} is not supported"))),
                        };
                        Some((hook.to_string(), o.get("prio").and_then(Value::as_i64).unwrap_or(0), policy))
                    }
                };
                chain_index.insert((family.clone(), table.clone(), name.clone()), chains.len());
                chains.push(Chain { family, table, name, base, steps: Ok(Vec::new()) });
            }
            "rule" => {
                let chain = s(o, "chain");
                let handle = o.get("handle").and_then(Value::as_u64);
                let at = Where { chain: Some(chain.clone()), handle, ..at };
                let idx = *chain_index
                    .get(&(family.clone(), table.clone(), chain.clone()))
                    .ok_or_else(|| at.err(None, "rule of an unknown chain"))?;
                let c = &mut chains[idx];
                let Ok(steps) = &mut c.steps else { continue };
                let step = (|| {
                    let exprs = o
                        .get("expr")
                        .and_then(Value::as_array)
                        .ok_or_else(|| at.err(Some(item), "rule without expressions"))?;
                    let ctx = RuleCtx { opts, at: &at, family: &family, table: &table, sets: &sets };
                    ctx.rule(exprs)
                })();
                match step {
                    Ok((when, then, counter, noop, approx)) => {
                        let h = handle.unwrap_or(0);
                        if noop {
                            notes.push(format!("{family} {table} chain {chain} handle {h}: no verdict and no counter (a no-op in nftables); imported as a count rule"));
                        }
                        if let Some(a) = approx {
                            notes.push(format!("{family} {table} chain {chain} handle {h}: {a}"));
                        }
                        let comment = o.get("comment").and_then(Value::as_str).map(str::to_string);
                        steps.push(Step { handle: h, when, then, counter, comment });
                    }
                    Err(e) => c.steps = Err(e),
                }
            }
            other => {
                return Err(at.err(Some(item), format!("{other:?} objects are not supported")));
            }
        }
    }
    Ok(Ruleset { chains, notes })
}

/// Inlines, for each base chain, the chains it reaches by jump and goto,
/// into one first-match rule set with the chain policy as its default.
///
/// A jumped-to chain's rules are conjoined with the jump's conditions and
/// placed where the jump was: a packet they do not decide falls through to
/// the rules after the jump, as nftables returns there. A `return` before
/// a chain's end, and the end of a chain entered by `goto`, continue
/// elsewhere: the rules of that continuation (the caller's rest, up to the
/// base chain's policy) are repeated under the return's conditions. A loop
/// of jumps, more than [`MAX_JUMP_DEPTH`] nested jumps, or more than
/// [`crate::MAX_RULES`] rules in a result are refused.
pub fn flatten(rs: &Ruleset) -> Result<Import, ImportError> {
    let mut notes = rs.notes.clone();
    let mut reached = vec![false; rs.chains.len()];
    let mut out_chains = Vec::new();
    for (bi, c) in rs.chains.iter().enumerate() {
        let Some((hook, priority, policy)) = &c.base else { continue };
        let at = |handle: Option<u64>, chain: &Chain| Where {
            table: Some(format!("{} {}", chain.family, chain.table)),
            chain: Some(chain.name.clone()),
            handle,
        };
        check_loops(rs, bi, &mut Vec::new(), &mut reached, &mut vec![usize::MAX; rs.chains.len()], &at)?;
        let mut f = Flat { rs, out: Vec::new(), policy: *policy, work: 0, base: bi, nesting: 0 };
        let all = Rule::new(RuleAction::Count);
        f.emit(bi, 0, &all, &mut Vec::new(), false, &[])?;
        let rs_name = sanitize(&format!("{}_{}_{}", c.family, c.table, c.name));
        let mut set = RuleSet::new(rs_name, *policy);
        let mut handles = Vec::new();
        let mut origins = Vec::new();
        for (r, h, o) in f.out {
            set.rules.push(r);
            handles.push(h);
            origins.push(o);
        }
        set.validate().map_err(|e| ImportError {
            table: Some(format!("{} {}", c.family, c.table)),
            chain: Some(c.name.clone()),
            handle: e.rule.and_then(|r| handles.get(r).copied()),
            expr: None,
            reason: format!("the translated rule cannot match: {}", e.message),
        })?;
        out_chains.push(ImportedChain {
            family: c.family.clone(),
            table: c.table.clone(),
            chain: c.name.clone(),
            hook: hook.clone(),
            priority: *priority,
            set,
            handles,
            origins,
        });
    }
    for (i, c) in rs.chains.iter().enumerate() {
        if !reached[i] && c.base.is_none() {
            notes.push(format!(
                "{} {} chain {}: no base chain jumps to it; not imported{}",
                c.family,
                c.table,
                c.name,
                c.steps.as_ref().err().map_or(String::new(), |e| format!(" (it could not be: {e})"))
            ));
        }
    }
    for c in &out_chains {
        let same: Vec<&ImportedChain> = out_chains.iter().filter(|o| o.hook == c.hook).collect();
        if same.len() > 1 && std::ptr::eq(same[0], c) {
            let names: Vec<String> = same.iter().map(|o| format!("{} {} {}", o.family, o.table, o.chain)).collect();
            notes.push(format!(
                "hook {}: {} chains ({}); nftables evaluates all of them in priority order and a packet must be accepted by each",
                c.hook,
                same.len(),
                names.join(", ")
            ));
        }
    }
    Ok(Import { sets: out_chains, notes })
}

/// Refuses a loop of jumps/gotos or too deep a nesting among the chains
/// reachable from `chain`, and marks them reached. `checked[i]`: the
/// shallowest depth chain `i` was entered at and found sound (no loop can
/// be reached from it, and no deeper entry was refused), so it is not
/// walked again from as deep or deeper.
fn check_loops(
    rs: &Ruleset,
    chain: usize,
    path: &mut Vec<usize>,
    reached: &mut [bool],
    checked: &mut [usize],
    at: &dyn Fn(Option<u64>, &Chain) -> Where,
) -> Result<(), ImportError> {
    let c = &rs.chains[chain];
    reached[chain] = true;
    let depth = path.len();
    if checked[chain] <= depth {
        return Ok(());
    }
    let steps = c.steps.as_ref().map_err(Clone::clone)?;
    path.push(chain);
    for st in steps {
        let (Then::Jump(t) | Then::Goto(t)) = &st.then else { continue };
        let w = at(Some(st.handle), c);
        let Some(ti) = rs.target(chain, t) else {
            return Err(w.err(None, format!("jump to chain {t:?}, which does not exist")));
        };
        if rs.chains[ti].base.is_some() {
            return Err(w.err(None, format!("jump to base chain {t:?} is not supported")));
        }
        if let Some(p) = path.iter().position(|&x| x == ti) {
            let names: Vec<&str> =
                path[p..].iter().chain(std::iter::once(&ti)).map(|&i| rs.chains[i].name.as_str()).collect();
            return Err(w.err(None, format!("jump loop: {}", names.join(" -> "))));
        }
        if path.len() > MAX_JUMP_DEPTH {
            return Err(w.err(None, format!("more than {MAX_JUMP_DEPTH} nested jumps (the nftables limit)")));
        }
        check_loops(rs, ti, path, reached, checked, at)?;
    }
    path.pop();
    checked[chain] = depth;
    Ok(())
}

/// Visits (rule emissions and jumps followed) allowed per base chain
/// before the inlining is refused as too large.
const MAX_WORK: usize = 1 << 20;

/// Nested expansions (a jump, or the continuation after a return) allowed:
/// 16 jumps deep, each with room for continuations.
const MAX_NESTING: usize = 160;

struct Flat<'a> {
    rs: &'a Ruleset,
    out: Vec<(Rule, u64, String)>,
    policy: Action,
    work: usize,
    base: usize,
    /// Nested `emit` calls (jumps and continuations), bounded so that a
    /// ruleset cannot exhaust the stack.
    nesting: usize,
}

impl Flat<'_> {
    fn too_big(&self, what: &str) -> ImportError {
        let c = &self.rs.chains[self.base];
        Where { table: Some(format!("{} {}", c.family, c.table)), chain: Some(c.name.clone()), handle: None }
            .err(None, format!("inlining its jumps {what}: simplify the returns and gotos"))
    }

    fn push(&mut self, mut r: Rule, action: RuleAction, handle: u64, origin: String) -> Result<(), ImportError> {
        if self.out.len() >= crate::MAX_RULES {
            return Err(self.too_big(&format!("yields more than {} rules", crate::MAX_RULES)));
        }
        r.action = action;
        self.out.push((r, handle, origin));
        Ok(())
    }

    /// Emits chain `chain` from step `start` for packets matching `c`, with
    /// the return stack `stack`. `terminal`: what falls off the chain's end
    /// must be sent on explicitly (to the stack's top, or the policy);
    /// otherwise the rules emitted next are its continuation.
    fn emit(
        &mut self,
        chain: usize,
        start: usize,
        c: &Rule,
        stack: &mut Vec<(usize, usize)>,
        terminal: bool,
        via: &[String],
    ) -> Result<(), ImportError> {
        if self.nesting >= MAX_NESTING {
            return Err(self.too_big(&format!(
                "nests more than {MAX_NESTING} expansions (jumps, and continuations after returns)"
            )));
        }
        self.nesting += 1;
        let r = self.emit_chain(chain, start, c, stack, terminal, via);
        self.nesting -= 1;
        r
    }

    fn emit_chain(
        &mut self,
        chain: usize,
        start: usize,
        c: &Rule,
        stack: &mut Vec<(usize, usize)>,
        terminal: bool,
        via: &[String],
    ) -> Result<(), ImportError> {
        let rs = self.rs;
        let ch = &rs.chains[chain];
        let steps = ch.steps.as_ref().map_err(Clone::clone)?;
        for (i, st) in steps.iter().enumerate().skip(start) {
            let last = i + 1 == steps.len();
            let origin = || {
                let mut o = format!("chain {} handle {}", ch.name, st.handle);
                for v in via.iter().rev() {
                    o.push_str(&format!(", via {v}"));
                }
                o
            };
            for alt in &st.when {
                self.work += 1;
                if self.work > MAX_WORK {
                    return Err(self.too_big(&format!("takes more than {MAX_WORK} steps")));
                }
                let Some(mut d) = conjoin(c, alt) else { continue };
                d.comment.clone_from(&st.comment);
                if st.counter && !matches!(st.then, Then::Verdict(_)) {
                    self.push(d.clone(), RuleAction::Count, st.handle, origin())?;
                }
                match &st.then {
                    Then::Verdict(a) => self.push(d, *a, st.handle, origin())?,
                    Then::Jump(t) | Then::Goto(t) => {
                        let ti = rs.target(chain, t).ok_or_else(|| {
                            self.too_big("met a jump to a missing chain") // unreachable: check_loops ran first
                        })?;
                        let mut via2 = via.to_vec();
                        let kind = if matches!(st.then, Then::Jump(_)) { "jump" } else { "goto" };
                        via2.push(format!("{kind} at chain {} handle {}", ch.name, st.handle));
                        if matches!(st.then, Then::Jump(_)) {
                            stack.push((chain, i + 1));
                            let r = self.emit(ti, 0, &d, stack, false, &via2);
                            stack.pop();
                            r?;
                        } else {
                            // The target's end continues where this chain
                            // would have ended: naturally if this is its
                            // last rule, else explicitly.
                            self.emit(ti, 0, &d, stack, terminal || !last, &via2)?;
                        }
                    }
                    Then::Return => {
                        // A return as the last rule is the chain's end.
                        if !last {
                            self.cont(&d, stack, via, st.handle, origin())?;
                        }
                    }
                }
            }
        }
        if terminal {
            let h = steps.last().map_or(0, |s| s.handle);
            self.cont(c, stack, via, h, format!("end of chain {}", ch.name))?;
        }
        Ok(())
    }

    /// Emits what happens after the current chain ends for packets matching `c`.
    fn cont(
        &mut self,
        c: &Rule,
        stack: &[(usize, usize)],
        via: &[String],
        handle: u64,
        origin: String,
    ) -> Result<(), ImportError> {
        match stack.split_last() {
            Some((&(ch, pc), rest)) => {
                let mut rest = rest.to_vec();
                let via = &via[..via.len().saturating_sub(1)];
                self.emit(ch, pc, c, &mut rest, true, via)
            }
            None => {
                // Skip a policy rule the previous rule already decides.
                if let Some((prev, _, _)) = self.out.last()
                    && prev.action != RuleAction::Count
                    && same_conditions(prev, c)
                {
                    return Ok(());
                }
                let mut r = c.clone();
                r.comment = None;
                self.push(r, self.policy.into(), handle, format!("{origin}: chain policy"))
            }
        }
    }
}

impl From<Action> for RuleAction {
    fn from(a: Action) -> Self {
        match a {
            Action::Accept => RuleAction::Accept,
            Action::Drop => RuleAction::Drop,
        }
    }
}

fn same_conditions(a: &Rule, b: &Rule) -> bool {
    let mut a = a.clone();
    a.action = b.action;
    a.comment.clone_from(&b.comment);
    a == *b
}

/// Both rules' conditions at once (`b`'s action), or `None` if no packet
/// can match both.
fn conjoin(a: &Rule, b: &Rule) -> Option<Rule> {
    fn list<T: Clone + PartialEq>(
        a: &Option<List<T>>,
        b: &Option<List<T>>,
        f: impl Fn(&T, &T) -> Option<T>,
    ) -> Option<Option<List<T>>> {
        match (a, b) {
            (None, None) => Some(None),
            (Some(x), None) | (None, Some(x)) => Some(Some(x.clone())),
            (Some(x), Some(y)) => {
                let mut out: Vec<T> = Vec::new();
                for p in x.iter() {
                    for q in y.iter() {
                        if let Some(r) = f(p, q)
                            && !out.contains(&r)
                        {
                            out.push(r);
                        }
                    }
                }
                (!out.is_empty()).then_some(Some(List(out)))
            }
        }
    }
    fn num<K: RangeKind>(x: &NumRange<K>, y: &NumRange<K>) -> Option<NumRange<K>> {
        NumRange::new(x.lo.max(y.lo), x.hi.min(y.hi))
    }
    let pfx = |x: &Prefix, y: &Prefix| {
        if x.is_v6() != y.is_v6() {
            return None;
        }
        let ((xl, xh), (yl, yh)) = (x.range(), y.range());
        if xl <= yl && yh <= xh {
            Some(*y)
        } else if yl <= xl && xh <= yh {
            Some(*x)
        } else {
            None
        }
    };
    let flags = |x: &TcpFlags, y: &TcpFlags| {
        let common = x.mask & y.mask;
        (x.value & common == y.value & common).then(|| TcpFlags::new(x.mask | y.mask, x.value | y.value))
    };
    let family = match (a.family, b.family) {
        (Some(x), Some(y)) if x != y => return None,
        (x, y) => x.or(y),
    };
    let r = Rule {
        action: b.action,
        family,
        src: list(&a.src, &b.src, pfx)?,
        dst: list(&a.dst, &b.dst, pfx)?,
        proto: list(&a.proto, &b.proto, num)?,
        sport: list(&a.sport, &b.sport, num)?,
        dport: list(&a.dport, &b.dport, num)?,
        icmp_type: list(&a.icmp_type, &b.icmp_type, num)?,
        icmp_code: list(&a.icmp_code, &b.icmp_code, num)?,
        icmpv6_type: list(&a.icmpv6_type, &b.icmpv6_type, num)?,
        icmpv6_code: list(&a.icmpv6_code, &b.icmpv6_code, num)?,
        tcp_flags: list(&a.tcp_flags, &b.tcp_flags, flags)?,
        iif: list(&a.iif, &b.iif, |x, y| (x == y).then(|| x.clone()))?,
        oif: list(&a.oif, &b.oif, |x, y| (x == y).then(|| x.clone()))?,
        vlan: list(&a.vlan, &b.vlan, num)?,
        dscp: list(&a.dscp, &b.dscp, num)?,
        comment: b.comment.clone(),
    };
    // A rule validation refuses can never match.
    RuleSet { name: "x".into(), default: Action::Accept, rules: vec![r.clone()] }.validate().ok()?;
    Some(r)
}

fn check_family(at: &Where, family: &str) -> Result<(), ImportError> {
    if matches!(family, "ip" | "ip6" | "inet") {
        Ok(())
    } else {
        Err(at.err(None, format!("family {family:?} is not supported (only ip, ip6, inet)")))
    }
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// An element of a match's right-hand side.
#[derive(Clone, Debug)]
enum Atom {
    Str(String),
    Num(u64),
    Prefix(String, u8),
    Range(Box<Atom>, Box<Atom>),
    /// A list of flag names (`["syn", "ack"]`): their bitwise OR.
    Flags(Vec<String>),
}

struct RuleCtx<'a> {
    opts: &'a ImportOptions,
    at: &'a Where,
    family: &'a str,
    table: &'a str,
    sets: &'a HashMap<(String, String, String), NamedSet>,
}

/// A translated rule: alternatives, effect, counter, no-op, note.
type RuleParts = (Vec<Rule>, Then, bool, bool, Option<String>);

/// Parses one right-hand-side element into a numeric range.
type AtomParser<'a> = dyn Fn(&Atom) -> Result<(u32, u32), ImportError> + 'a;

/// Numeric conditions being accumulated: sorted disjoint ranges.
type NumSet = Vec<(u32, u32)>;

#[derive(Default)]
struct Acc {
    v6: Option<bool>,
    src: Option<Vec<Prefix>>,
    dst: Option<Vec<Prefix>>,
    proto: Option<NumSet>,
    sport: Option<NumSet>,
    dport: Option<NumSet>,
    icmp_v6: Option<bool>,
    icmp_type: Option<NumSet>,
    icmp_code: Option<NumSet>,
    tcp_flags: Option<Vec<TcpFlags>>,
    iif: Option<Vec<String>>,
    oif: Option<Vec<String>>,
    dscp: Option<NumSet>,
}

fn intersect(a: &NumSet, b: &NumSet) -> NumSet {
    let mut out = Vec::new();
    for &(x, y) in a {
        for &(u, v) in b {
            let (lo, hi) = (x.max(u), y.min(v));
            if lo <= hi {
                out.push((lo, hi));
            }
        }
    }
    out
}

fn complement(a: &NumSet, max: u32) -> NumSet {
    let mut out = Vec::new();
    let mut next = 0u64;
    for &(lo, hi) in a {
        if (lo as u64) > next {
            out.push((next as u32, lo - 1));
        }
        next = hi as u64 + 1;
    }
    if next <= max as u64 {
        out.push((next as u32, max));
    }
    out
}

fn norm(v: NumSet) -> NumSet {
    normalize(v.into_iter().map(|(a, b)| (a as u128, b as u128)).collect())
        .into_iter()
        .map(|(a, b)| (a as u32, b as u32))
        .collect()
}

fn merge_num(slot: &mut Option<NumSet>, v: NumSet) {
    *slot = Some(match slot.take() {
        Some(old) => norm(intersect(&old, &v)),
        None => norm(v),
    });
}

/// The smallest list of prefixes covering `lo..=hi` in a `width`-bit space.
fn range_to_prefixes(mut lo: u128, hi: u128, width: u32, v6: bool) -> Vec<Prefix> {
    let mut out = Vec::new();
    loop {
        let mut len = width;
        // Grow the block while it stays aligned and inside the range.
        while len > 0 {
            let host = width - (len - 1);
            let size_m1 = if host >= 128 { u128::MAX } else { (1u128 << host) - 1 };
            if lo & size_m1 != 0 || lo.checked_add(size_m1).is_none_or(|e| e > hi) {
                break;
            }
            len -= 1;
        }
        out.push(Prefix::from_bits(lo, v6, len as u8));
        let host = width - len;
        let size_m1 = if host >= 128 { u128::MAX } else { (1u128 << host) - 1 };
        match lo.checked_add(size_m1) {
            Some(end) if end < hi => lo = end + 1,
            _ => return out,
        }
    }
}

impl RuleCtx<'_> {
    fn err(&self, e: &Value, reason: impl Into<String>) -> ImportError {
        self.at.err(Some(e), reason)
    }

    /// Translates one rule: its conditions (alternatives), what it does,
    /// whether it has a counter, whether it is a no-op (neither verdict nor
    /// counter), and a note if a `ct state` match was approximated.
    fn rule(&self, exprs: &[Value]) -> Result<RuleParts, ImportError> {
        let mut acc = Acc {
            v6: match self.family {
                "ip" => Some(false),
                "ip6" => Some(true),
                _ => None,
            },
            ..Default::default()
        };
        let mut then: Option<Then> = None;
        let mut counter = false;
        let mut ct: Option<(Vec<Rule>, String)> = None;
        for e in exprs {
            if then.is_some() {
                return Err(self.err(e, "expression after the verdict"));
            }
            let Some((k, body)) = e.as_object().and_then(|m| m.iter().next()) else {
                return Err(self.err(e, "unexpected expression"));
            };
            let target = || {
                body.get("target")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| self.err(e, format!("{k} without a target chain")))
            };
            match k.as_str() {
                "match" if body.get("left").is_some_and(|l| l.get("ct").is_some()) => {
                    if ct.is_some() {
                        return Err(self.err(e, "ct matched twice in one rule; not supported"));
                    }
                    ct = Some(self.ct_state(e, body)?);
                }
                "match" => self.matcher(&mut acc, e, body)?,
                "counter" => {
                    if body.is_string() {
                        return Err(self.err(e, "named counters are not supported (tern counts every rule)"));
                    }
                    counter = true;
                }
                "accept" => then = Some(Then::Verdict(RuleAction::Accept)),
                "drop" => then = Some(Then::Verdict(RuleAction::Drop)),
                "jump" => then = Some(Then::Jump(target()?)),
                "goto" => then = Some(Then::Goto(target()?)),
                "return" => then = Some(Then::Return),
                "continue" => return Err(self.err(e, "continue is not supported")),
                "reject" => return Err(self.err(e, "reject is not supported (tern drops silently; use drop)")),
                "log" | "limit" | "quota" | "meter" | "queue" | "notrack" | "ct" | "snat" | "dnat" | "masquerade"
                | "redirect" | "mangle" | "set" | "fwd" | "dup" => {
                    return Err(self.err(e, format!("{k} is not supported by tern's stateless firewall")));
                }
                _ => return Err(self.err(e, format!("expression {k:?} is not supported"))),
            }
        }
        let noop = then.is_none() && !counter;
        let mut r = Rule::new(RuleAction::Count);
        self.finish(acc, &mut r)?;
        let (when, note) = match ct {
            None => match (RuleSet { name: "x".into(), default: Action::Accept, rules: vec![r.clone()] }).validate() {
                Ok(()) => (vec![r], None),
                Err(e) => (vec![], Some(format!("can never match ({}); left out", e.message))),
            },
            Some((alts, note)) => (alts.iter().filter_map(|a| conjoin(&r, a)).collect(), Some(note)),
        };
        Ok((when, then.unwrap_or(Then::Verdict(RuleAction::Count)), counter, noop, note))
    }

    /// A `ct state` match: refused, or (with [`CtMode::Stateless`]) its
    /// stateless approximation as alternatives, with a note saying so.
    fn ct_state(&self, e: &Value, m: &Value) -> Result<(Vec<Rule>, String), ImportError> {
        let key = m.get("left").and_then(|l| l.get("ct")).and_then(|c| c.get("key")).and_then(Value::as_str);
        if key != Some("state") {
            return Err(self.err(
                e,
                format!(
                    "connection tracking match ct {} is stateful; tern's firewall is stateless",
                    key.unwrap_or("?")
                ),
            ));
        }
        if self.opts.ct == CtMode::Refuse {
            return Err(self.err(
                e,
                "connection tracking (ct state) matches are stateful and tern's firewall is stateless; \
                 refused (tern acl import-nft --ct stateless approximates them, see docs/CLI.md)",
            ));
        }
        let op = m.get("op").and_then(Value::as_str).unwrap_or("==");
        if !matches!(op, "==" | "in") {
            return Err(self.err(e, format!("operator {op:?} on ct state is not supported")));
        }
        let right = m.get("right").ok_or_else(|| self.err(e, "match without right side"))?;
        let mut states = Vec::new();
        for a in self.atoms(e, right)? {
            match a {
                Atom::Str(s) => states.push(s),
                Atom::Flags(v) => states.extend(v),
                _ => return Err(self.err(e, "expected ct states")),
            }
        }
        let tcp = |flags: &[(u8, u8)]| {
            let mut r = Rule::new(RuleAction::Count);
            r.proto = Some(List(vec![NumRange::single(6).expect("6")]));
            r.tcp_flags = Some(List(flags.iter().map(|&(m, v)| TcpFlags::new(m, v)).collect()));
            r
        };
        const SYN: u8 = 0x02;
        const RST: u8 = 0x04;
        const ACK: u8 = 0x10;
        let mut alts: Vec<Rule> = Vec::new();
        for st in &states {
            match st.as_str() {
                "established" => alts.push(tcp(&[(ACK, ACK), (RST, RST)])),
                "related" => {
                    let mut r4 = Rule::new(RuleAction::Count);
                    r4.family = Some(Family::Ipv4);
                    r4.proto = Some(List(vec![NumRange::single(1).expect("1")]));
                    r4.icmp_type = Some(List([3, 11, 12].iter().filter_map(|&t| NumRange::single(t)).collect()));
                    let mut r6 = Rule::new(RuleAction::Count);
                    r6.family = Some(Family::Ipv6);
                    r6.proto = Some(List(vec![NumRange::single(58).expect("58")]));
                    r6.icmpv6_type = Some(List(vec![NumRange::new(1, 4).expect("1-4")]));
                    alts.push(r4);
                    alts.push(r6);
                }
                "new" => {
                    alts.push(tcp(&[(SYN | ACK, SYN)]));
                    let mut r = Rule::new(RuleAction::Count);
                    r.proto =
                        Some(List(vec![NumRange::new(0, 5).expect("0-5"), NumRange::new(7, 255).expect("7-255")]));
                    alts.push(r);
                }
                "invalid" | "untracked" => {}
                other => return Err(self.err(e, format!("{other:?} is not a ct state"))),
            }
        }
        let note = if alts.is_empty() {
            format!("ct state {} approximated as never (tern cannot tell); the rule is left out", states.join(","))
        } else {
            format!(
                "ct state {} approximated statelessly (established: TCP with ACK or RST; related: ICMP errors; new: TCP SYN without ACK or any other protocol)",
                states.join(",")
            )
        };
        Ok((alts, note))
    }

    fn finish(&self, acc: Acc, r: &mut Rule) -> Result<(), ImportError> {
        fn ranges<K: RangeKind>(v: Vec<(u32, u32)>) -> Option<List<NumRange<K>>> {
            Some(List(v.into_iter().filter_map(|(a, b)| NumRange::new(a, b)).collect()))
        }
        let none = Value::Null;
        if let Some(l) = &acc.src {
            if l.is_empty() {
                return Err(self.err(&none, "the source address condition matches nothing"));
            }
            r.src = Some(List(l.clone()));
        }
        if let Some(l) = &acc.dst {
            if l.is_empty() {
                return Err(self.err(&none, "the destination address condition matches nothing"));
            }
            r.dst = Some(List(l.clone()));
        }
        if let Some(v6) = acc.v6
            && r.src.is_none()
            && r.dst.is_none()
            && self.family == "inet"
        {
            r.family = Some(if v6 { Family::Ipv6 } else { Family::Ipv4 });
        }
        if self.family != "inet" && r.src.is_none() && r.dst.is_none() {
            r.family = Some(if self.family == "ip6" { Family::Ipv6 } else { Family::Ipv4 });
        }
        if let Some(p) = acc.proto {
            r.proto = ranges(p);
        }
        r.sport = acc.sport.and_then(ranges);
        r.dport = acc.dport.and_then(ranges);
        match acc.icmp_v6 {
            Some(true) => {
                r.icmpv6_type = acc.icmp_type.and_then(ranges);
                r.icmpv6_code = acc.icmp_code.and_then(ranges);
            }
            _ => {
                r.icmp_type = acc.icmp_type.and_then(ranges);
                r.icmp_code = acc.icmp_code.and_then(ranges);
            }
        }
        r.tcp_flags = acc.tcp_flags.map(List);
        r.iif = acc.iif.map(|v| List(v.into_iter().map(IfName).collect()));
        r.oif = acc.oif.map(|v| List(v.into_iter().map(IfName).collect()));
        r.dscp = acc.dscp.and_then(ranges);
        Ok(())
    }

    fn set_family(&self, acc: &mut Acc, e: &Value, v6: bool) -> Result<(), ImportError> {
        match acc.v6 {
            Some(x) if x != v6 => Err(self.err(
                e,
                "this match needs the other IP version than the table or an earlier match: the rule could never match",
            )),
            _ => {
                acc.v6 = Some(v6);
                Ok(())
            }
        }
    }

    fn matcher(&self, acc: &mut Acc, e: &Value, m: &Value) -> Result<(), ImportError> {
        let op = m.get("op").and_then(Value::as_str).unwrap_or("==");
        let left = m.get("left").ok_or_else(|| self.err(e, "match without left side"))?;
        let right = m.get("right").ok_or_else(|| self.err(e, "match without right side"))?;

        // tcp flags & mask == value
        if let Some(and) = left.get("&").and_then(Value::as_array) {
            let (Some(l), Some(mask)) = (and.first(), and.get(1)) else {
                return Err(self.err(e, "malformed & expression"));
            };
            if !is_payload(l, "tcp", "flags") {
                return Err(self.err(e, "bitwise matches are only supported on tcp flags"));
            }
            let mask = self.flags_value(e, &self.atom(e, mask)?)?;
            let value = self.flags_value(e, &self.atom(e, right)?)?;
            let alts: Vec<TcpFlags> = match op {
                "==" => vec![TcpFlags::new(mask, value)],
                "!=" => (0..=255u8)
                    .filter(|v| v & !mask == 0 && *v != value & mask)
                    .map(|v| TcpFlags::new(mask, v))
                    .collect(),
                _ => return Err(self.err(e, format!("operator {op:?} on tcp flags is not supported"))),
            };
            merge_num(&mut acc.proto, vec![(6, 6)]);
            return self.add_flags(acc, e, alts);
        }

        let atoms = self.atoms(e, right)?;
        let neg = op == "!=";
        let cmp = |max: u32, atoms: &[Atom], parse: &AtomParser| -> Result<NumSet, ImportError> {
            let mut v = Vec::new();
            for a in atoms {
                v.push(parse(a)?);
            }
            let v = norm(v);
            let one = || v.first().map(|x| x.0).unwrap_or(0);
            Ok(match op {
                "==" | "in" => v,
                "!=" => complement(&v, max),
                "<" => {
                    if one() == 0 {
                        vec![]
                    } else {
                        vec![(0, one() - 1)]
                    }
                }
                "<=" => vec![(0, one())],
                ">" => {
                    if one() >= max {
                        vec![]
                    } else {
                        vec![(one() + 1, max)]
                    }
                }
                ">=" => vec![(one(), max)],
                _ => return Err(self.err(e, format!("operator {op:?} is not supported"))),
            })
        };

        if let Some(p) = left.get("payload") {
            let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("");
            let field = p.get("field").and_then(Value::as_str).unwrap_or("");
            match (proto, field) {
                ("ip" | "ip6", "saddr" | "daddr") => {
                    let v6 = proto == "ip6";
                    self.set_family(acc, e, v6)?;
                    if !matches!(op, "==" | "!=" | "in") {
                        return Err(self.err(e, format!("operator {op:?} on addresses is not supported")));
                    }
                    let mut ps = Vec::new();
                    for a in &atoms {
                        ps.extend(self.prefixes(e, a, v6)?);
                    }
                    if neg {
                        let width = if v6 { 128 } else { 32 };
                        let iv = normalize(ps.iter().map(|p| p.range()).collect());
                        let mut out = Vec::new();
                        let mut next: Option<u128> = Some(0);
                        for (lo, hi) in iv {
                            if let Some(n) = next
                                && lo > n
                            {
                                out.extend(range_to_prefixes(n, lo - 1, width, v6));
                            }
                            next = hi.checked_add(1);
                        }
                        let max = if v6 { u128::MAX } else { u32::MAX as u128 };
                        if let Some(n) = next
                            && n <= max
                        {
                            out.extend(range_to_prefixes(n, max, width, v6));
                        }
                        ps = out;
                    }
                    let slot = if field == "saddr" { &mut acc.src } else { &mut acc.dst };
                    if slot.is_some() {
                        return Err(self.err(e, "the same address is matched twice in one rule; not supported"));
                    }
                    *slot = Some(ps);
                }
                ("ip", "protocol") => {
                    self.set_family(acc, e, false)?;
                    let v = cmp(255, &atoms, &|a| self.num(e, a, 255, names::PROTOCOLS))?;
                    merge_num(&mut acc.proto, v);
                }
                ("ip" | "ip6", "dscp") => {
                    self.set_family(acc, e, proto == "ip6")?;
                    let v = cmp(63, &atoms, &|a| self.num(e, a, 63, names::DSCP))?;
                    merge_num(&mut acc.dscp, v);
                }
                ("tcp" | "udp" | "sctp" | "dccp" | "udplite" | "th", "sport" | "dport") => {
                    if proto != "th" {
                        let n = names::lookup(names::PROTOCOLS, proto).unwrap_or(0) as u32;
                        merge_num(&mut acc.proto, vec![(n, n)]);
                    }
                    let v = cmp(65535, &atoms, &|a| self.num(e, a, 65535, &[]))?;
                    merge_num(if field == "sport" { &mut acc.sport } else { &mut acc.dport }, v);
                }
                ("icmp" | "icmpv6", "type" | "code") => {
                    let v6 = proto == "icmpv6";
                    if acc.icmp_v6.is_some_and(|x| x != v6) {
                        return Err(self.err(e, "icmp and icmpv6 in one rule: the rule could never match"));
                    }
                    acc.icmp_v6 = Some(v6);
                    let n = if v6 { 58 } else { 1 };
                    merge_num(&mut acc.proto, vec![(n, n)]);
                    let table = match (v6, field) {
                        (false, "type") => names::ICMP_TYPES,
                        (false, _) => names::ICMP_CODES,
                        (true, "type") => names::ICMPV6_TYPES,
                        (true, _) => names::ICMPV6_CODES,
                    };
                    let v = cmp(255, &atoms, &|a| self.num(e, a, 255, table))?;
                    merge_num(if field == "type" { &mut acc.icmp_type } else { &mut acc.icmp_code }, v);
                }
                ("tcp", "flags") => {
                    merge_num(&mut acc.proto, vec![(6, 6)]);
                    let alts: Vec<TcpFlags> = match op {
                        // `tcp flags syn,ack`: any of them set.
                        "in" => {
                            let mut v = Vec::new();
                            for a in &atoms {
                                let bits = self.flags_value(e, a)?;
                                for b in 0..8 {
                                    if bits >> b & 1 == 1 {
                                        v.push(TcpFlags::new(1 << b, 1 << b));
                                    }
                                }
                            }
                            v
                        }
                        // `tcp flags == syn` / `tcp flags { syn, fin }`: exact values.
                        "==" => atoms
                            .iter()
                            .map(|a| self.flags_value(e, a).map(|v| TcpFlags::new(0xff, v)))
                            .collect::<Result<_, _>>()?,
                        "!=" => {
                            let not: Vec<u8> =
                                atoms.iter().map(|a| self.flags_value(e, a)).collect::<Result<_, _>>()?;
                            (0..=255u8).filter(|v| !not.contains(v)).map(|v| TcpFlags::new(0xff, v)).collect()
                        }
                        _ => return Err(self.err(e, format!("operator {op:?} on tcp flags is not supported"))),
                    };
                    self.add_flags(acc, e, alts)?;
                }
                _ => return Err(self.err(e, format!("payload match {proto} {field} is not supported"))),
            }
            return Ok(());
        }
        if let Some(meta) = left.get("meta") {
            let key = meta.get("key").and_then(Value::as_str).unwrap_or("");
            match key {
                "l4proto" => {
                    let v = cmp(255, &atoms, &|a| self.num(e, a, 255, names::PROTOCOLS))?;
                    merge_num(&mut acc.proto, v);
                }
                "nfproto" => {
                    if atoms.len() != 1 || neg {
                        return Err(self.err(e, "only meta nfproto ipv4 / ipv6 is supported"));
                    }
                    match &atoms[0] {
                        Atom::Str(s) if s == "ipv4" => self.set_family(acc, e, false)?,
                        Atom::Str(s) if s == "ipv6" => self.set_family(acc, e, true)?,
                        _ => return Err(self.err(e, "only meta nfproto ipv4 / ipv6 is supported")),
                    }
                }
                "iifname" | "oifname" | "iif" | "oif" => {
                    if !matches!(op, "==" | "in") {
                        return Err(self.err(e, format!("operator {op:?} on interface names is not supported (tern cannot enumerate the other interfaces)")));
                    }
                    let mut names_v = Vec::new();
                    for a in &atoms {
                        match a {
                            Atom::Str(s) if s.contains('*') => {
                                return Err(self.err(e, "wildcard interface names are not supported"));
                            }
                            Atom::Str(s) if IfName::from_text_ok(s) => names_v.push(s.clone()),
                            _ => return Err(self.err(e, "expected interface names")),
                        }
                    }
                    let slot = if key.starts_with('i') { &mut acc.iif } else { &mut acc.oif };
                    if slot.is_some() {
                        return Err(self.err(e, "the same interface is matched twice in one rule; not supported"));
                    }
                    *slot = Some(names_v);
                }
                _ => return Err(self.err(e, format!("meta {key} is not supported"))),
            }
            return Ok(());
        }
        if left.get("ct").is_some() {
            return Err(self.err(e, "connection tracking (ct) matches are stateful and not supported"));
        }
        Err(self.err(e, "match on this expression is not supported"))
    }

    fn add_flags(&self, acc: &mut Acc, e: &Value, alts: Vec<TcpFlags>) -> Result<(), ImportError> {
        if acc.tcp_flags.is_some() {
            return Err(self.err(e, "tcp flags matched twice in one rule; not supported"));
        }
        acc.tcp_flags = Some(alts);
        Ok(())
    }

    fn atom(&self, e: &Value, v: &Value) -> Result<Atom, ImportError> {
        Ok(match v {
            Value::String(s) => Atom::Str(s.clone()),
            Value::Number(n) => Atom::Num(n.as_u64().ok_or_else(|| self.err(e, format!("bad number {n}")))?),
            Value::Array(a) => Atom::Flags(
                a.iter()
                    .map(|x| x.as_str().map(str::to_string).ok_or_else(|| self.err(e, "expected flag names")))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(o) => {
                if let Some(p) = o.get("prefix") {
                    let addr =
                        p.get("addr").and_then(Value::as_str).ok_or_else(|| self.err(e, "prefix without addr"))?;
                    let len = p.get("len").and_then(Value::as_u64).ok_or_else(|| self.err(e, "prefix without len"))?;
                    Atom::Prefix(addr.to_string(), u8::try_from(len).map_err(|_| self.err(e, "bad prefix length"))?)
                } else if let Some(r) = o.get("range").and_then(Value::as_array) {
                    let (Some(a), Some(b)) = (r.first(), r.get(1)) else { return Err(self.err(e, "malformed range")) };
                    Atom::Range(Box::new(self.atom(e, a)?), Box::new(self.atom(e, b)?))
                } else {
                    return Err(self.err(e, format!("value {v} is not supported")));
                }
            }
            _ => return Err(self.err(e, format!("value {v} is not supported"))),
        })
    }

    /// The right-hand side as a list of alternatives (sets expanded).
    fn atoms(&self, e: &Value, v: &Value) -> Result<Vec<Atom>, ImportError> {
        if let Some(set) = v.get("set").and_then(Value::as_array) {
            return set.iter().map(|x| self.atom(e, x)).collect();
        }
        if let Some(name) = v.as_str().and_then(|s| s.strip_prefix('@')) {
            let key = (self.family.to_string(), self.table.to_string(), name.to_string());
            let set = self.sets.get(&key).ok_or_else(|| self.err(e, format!("unknown set @{name}")))?;
            set.usable.clone().map_err(|why| self.err(e, format!("set @{name}: {why}")))?;
            return set.elems.iter().map(|x| self.atom(e, x)).collect();
        }
        Ok(vec![self.atom(e, v)?])
    }

    fn num(&self, e: &Value, a: &Atom, max: u32, table: &[(&str, u8)]) -> Result<(u32, u32), ImportError> {
        let one = |a: &Atom| -> Result<u32, ImportError> {
            let v = match a {
                Atom::Num(n) => u32::try_from(*n).ok(),
                Atom::Str(s) => s.parse::<u32>().ok().or_else(|| names::lookup(table, s).map(u32::from)),
                _ => None,
            };
            v.filter(|&v| v <= max).ok_or_else(|| self.err(e, format!("{a:?} is not a value of this field (0-{max})")))
        };
        match a {
            Atom::Range(lo, hi) => {
                let (lo, hi) = (one(lo)?, one(hi)?);
                if lo > hi {
                    return Err(self.err(e, "empty range"));
                }
                Ok((lo, hi))
            }
            a => one(a).map(|v| (v, v)),
        }
    }

    fn flags_value(&self, e: &Value, a: &Atom) -> Result<u8, ImportError> {
        let one =
            |s: &str| names::lookup(names::TCP_FLAGS, s).ok_or_else(|| self.err(e, format!("{s:?} is not a TCP flag")));
        match a {
            Atom::Num(n) => u8::try_from(*n).map_err(|_| self.err(e, "TCP flags value out of range")),
            Atom::Str(s) => one(s),
            Atom::Flags(v) => v.iter().try_fold(0u8, |acc, s| Ok(acc | one(s)?)),
            _ => Err(self.err(e, "expected TCP flags")),
        }
    }

    fn prefixes(&self, e: &Value, a: &Atom, v6: bool) -> Result<Vec<Prefix>, ImportError> {
        let addr = |s: &str| -> Result<IpAddr, ImportError> {
            let ip: IpAddr = s.parse().map_err(|_| self.err(e, format!("{s:?} is not an address")))?;
            if ip.is_ipv6() != v6 {
                return Err(self.err(e, format!("{s} is not an IPv{} address", if v6 { 6 } else { 4 })));
            }
            Ok(ip)
        };
        let bits = |ip: IpAddr| match ip {
            IpAddr::V4(a) => u32::from(a) as u128,
            IpAddr::V6(a) => u128::from(a),
        };
        Ok(match a {
            Atom::Str(s) => vec![Prefix::new_truncating(addr(s)?, if v6 { 128 } else { 32 })],
            Atom::Prefix(s, len) => vec![Prefix::new_truncating(addr(s)?, *len)],
            Atom::Range(lo, hi) => {
                let (Atom::Str(lo), Atom::Str(hi)) = (&**lo, &**hi) else {
                    return Err(self.err(e, "malformed address range"));
                };
                let (lo, hi) = (bits(addr(lo)?), bits(addr(hi)?));
                if lo > hi {
                    return Err(self.err(e, "empty address range"));
                }
                range_to_prefixes(lo, hi, if v6 { 128 } else { 32 }, v6)
            }
            _ => return Err(self.err(e, "expected an address, prefix or range")),
        })
    }
}

fn is_payload(v: &Value, proto: &str, field: &str) -> bool {
    v.get("payload").is_some_and(|p| {
        p.get("protocol").and_then(Value::as_str) == Some(proto)
            && p.get("field").and_then(Value::as_str) == Some(field)
    })
}

impl IfName {
    fn from_text_ok(s: &str) -> bool {
        <IfName as crate::value::Item>::from_text(s).is_ok()
    }
}

impl Import {
    /// The rule sets alone.
    pub fn rule_sets(&self) -> Vec<RuleSet> {
        self.sets.iter().map(|c| c.set.clone()).collect()
    }
}

/// Renders the import as TOML in tern's schema (`[[acl]]` tables), with
/// comments naming the nftables chain and rule handle of everything.
impl fmt::Display for Import {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        writeln!(f, "# Imported from an nftables ruleset by tern acl import-nft.")?;
        writeln!(f, "# Bind each rule set to interfaces with acl_in / acl_out, or live with")?;
        writeln!(f, "# tern acl load FILE --in IFACE=SET --out IFACE=SET. Rule sets:")?;
        for c in &self.sets {
            writeln!(f, "#   {} (hook {}, {} rules)", c.set.name, c.hook, c.set.rules.len())?;
        }
        for n in &self.notes {
            writeln!(f, "# NOTE: {n}")?;
        }
        for c in &self.sets {
            writeln!(f)?;
            writeln!(
                f,
                "# nft table {} {}, chain {} (hook {}, priority {})",
                c.family, c.table, c.chain, c.hook, c.priority
            )?;
            writeln!(f, "[[acl]]")?;
            writeln!(f, "name = {}", toml_str(&c.set.name))?;
            writeln!(f, "default = {}", toml_str(if c.set.default == Action::Drop { "drop" } else { "accept" }))?;
            for (r, o) in c.set.rules.iter().zip(&c.origins) {
                writeln!(f)?;
                writeln!(f, "# nft {o}")?;
                writeln!(f, "[[acl.rule]]")?;
                let body = toml::to_string(r).map_err(|_| fmt::Error)?;
                f.write_str(&body)?;
            }
        }
        Ok(())
    }
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_become_minimal_prefixes() {
        let p = range_to_prefixes(0x0a00_0001, 0x0a00_0009, 32, false);
        let s: Vec<String> = p.iter().map(|p| p.to_string()).collect();
        assert_eq!(s, ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/30", "10.0.0.8/31"]);
        assert_eq!(range_to_prefixes(0, u32::MAX as u128, 32, false)[0].to_string(), "0.0.0.0/0");
        assert_eq!(range_to_prefixes(0, u128::MAX, 128, true)[0].to_string(), "::/0");
        assert_eq!(complement(&vec![(0, 21), (23, 65535)], 65535), vec![(22, 22)]);
        assert_eq!(complement(&vec![(22, 22)], 65535), vec![(0, 21), (23, 65535)]);
    }
}
