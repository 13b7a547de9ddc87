//! Import of the stateless subset of an nftables ruleset, from the JSON of
//! `nft -j list ruleset` (libnftables-json(5)).
//!
//! Each base chain of type `filter` on hook `input`, `forward` or `output`
//! in a table of family `ip`, `ip6` or `inet` becomes one rule set; the
//! chain policy becomes its default. Translated: matches on `ip`/`ip6`
//! `saddr`/`daddr` (addresses, prefixes, ranges, anonymous and named sets),
//! `ip protocol` / `meta l4proto`, `tcp`/`udp`/`sctp`/`dccp`/`udplite`/`th`
//! `sport`/`dport` (values, ranges, sets, comparisons), `meta iifname`/
//! `oifname`/`iif`/`oif`, `icmp`/`icmpv6` `type`/`code`, `tcp flags`,
//! `ip`/`ip6 dscp`, `meta nfproto`, with `==`, `!=` (not for interface
//! names), `in`, `<`, `<=`, `>`, `>=`; verdicts `accept` and `drop`;
//! `counter` (every tern rule counts; a rule with a counter and no verdict
//! becomes a `count` rule).
//!
//! Everything else is refused with an error naming the table, chain, rule
//! handle and expression: connection tracking, jumps, NAT, log, limit,
//! reject, maps, dynamic sets, other hooks and families, wildcard interface
//! names. A refusal is deliberate: a firewall that silently dropped a
//! `ct state established accept` would lock its users out.
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

/// Imports the JSON of `nft -j list ruleset`.
pub fn import(json: &str) -> Result<Import, ImportError> {
    let top = Where::default();
    let v: Value = serde_json::from_str(json).map_err(|e| top.err(None, format!("not JSON: {e}")))?;
    let items = v
        .get("nftables")
        .and_then(Value::as_array)
        .ok_or_else(|| top.err(None, "no top-level \"nftables\" array (expected the output of nft -j list ruleset)"))?;

    let mut sets: HashMap<(String, String, String), NamedSet> = HashMap::new();
    let mut chains: Vec<ImportedChain> = Vec::new();
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
                let Some(hook) = o.get("hook").and_then(Value::as_str) else {
                    // A regular chain: only reachable by jump/goto, refused
                    // below if it has rules.
                    chain_index.insert((family, table, name), usize::MAX);
                    continue;
                };
                let ty = s(o, "type");
                if ty != "filter" {
                    return Err(at.err(Some(item), format!("chain type {ty:?} is not supported (only filter chains)")));
                }
                if !matches!(hook, "input" | "forward" | "output") {
                    return Err(
                        at.err(Some(item), format!("hook {hook:?} is not supported (only input, forward, output)"))
                    );
                }
                let default = match o.get("policy").and_then(Value::as_str).unwrap_or("accept") {
                    "accept" => Action::Accept,
                    "drop" => Action::Drop,
                    p => return Err(at.err(Some(item), format!("chain policy {p:?} is not supported"))),
                };
                let rs_name = sanitize(&format!("{family}_{table}_{name}"));
                chain_index.insert((family.clone(), table.clone(), name.clone()), chains.len());
                chains.push(ImportedChain {
                    family,
                    table,
                    chain: name,
                    hook: hook.to_string(),
                    priority: o.get("prio").and_then(Value::as_i64).unwrap_or(0),
                    set: RuleSet::new(rs_name, default),
                    handles: Vec::new(),
                });
            }
            "rule" => {
                let chain = s(o, "chain");
                let handle = o.get("handle").and_then(Value::as_u64);
                let at = Where { chain: Some(chain.clone()), handle, ..at };
                let idx = *chain_index
                    .get(&(family.clone(), table.clone(), chain.clone()))
                    .ok_or_else(|| at.err(None, "rule of an unknown chain"))?;
                let Some(c) = chains.get_mut(idx) else {
                    return Err(
                        at.err(None, "rules in a regular chain (reachable only by jump/goto) are not supported")
                    );
                };
                let exprs = o
                    .get("expr")
                    .and_then(Value::as_array)
                    .ok_or_else(|| at.err(Some(item), "rule without expressions"))?;
                let ctx = RuleCtx { at: &at, family: &family, table: &table, sets: &sets };
                let (mut rule, noop) = ctx.rule(exprs)?;
                if noop {
                    notes.push(format!("{family} {table} chain {chain} handle {}: no verdict and no counter (a no-op in nftables); imported as a count rule", handle.unwrap_or(0)));
                }
                if let Some(comment) = o.get("comment").and_then(Value::as_str) {
                    rule.comment = Some(comment.to_string());
                }
                c.set.rules.push(rule);
                c.handles.push(handle.unwrap_or(0));
            }
            other => {
                return Err(at.err(Some(item), format!("{other:?} objects are not supported")));
            }
        }
    }
    for c in &chains {
        let same: Vec<&ImportedChain> = chains.iter().filter(|o| o.hook == c.hook).collect();
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
    for c in &chains {
        c.set.validate().map_err(|e| ImportError {
            table: Some(format!("{} {}", c.family, c.table)),
            chain: Some(c.chain.clone()),
            handle: e.rule.and_then(|r| c.handles.get(r).copied()),
            expr: None,
            reason: format!("the translated rule cannot match: {}", e.message),
        })?;
    }
    Ok(Import { sets: chains, notes })
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
    at: &'a Where,
    family: &'a str,
    table: &'a str,
    sets: &'a HashMap<(String, String, String), NamedSet>,
}

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

    /// Translates one rule; the flag says it had neither verdict nor counter.
    fn rule(&self, exprs: &[Value]) -> Result<(Rule, bool), ImportError> {
        let mut acc = Acc {
            v6: match self.family {
                "ip" => Some(false),
                "ip6" => Some(true),
                _ => None,
            },
            ..Default::default()
        };
        let mut action: Option<RuleAction> = None;
        let mut counter = false;
        for e in exprs {
            if action.is_some() {
                return Err(self.err(e, "expression after the verdict"));
            }
            let Some((k, body)) = e.as_object().and_then(|m| m.iter().next()) else {
                return Err(self.err(e, "unexpected expression"));
            };
            match k.as_str() {
                "match" => self.matcher(&mut acc, e, body)?,
                "counter" => {
                    if body.is_string() {
                        return Err(self.err(e, "named counters are not supported (tern counts every rule)"));
                    }
                    counter = true;
                }
                "accept" => action = Some(RuleAction::Accept),
                "drop" => action = Some(RuleAction::Drop),
                "jump" | "goto" | "return" | "continue" => {
                    return Err(self.err(e, format!("{k} is not supported (rule sets are flat, first match wins)")));
                }
                "reject" => return Err(self.err(e, "reject is not supported (tern drops silently; use drop)")),
                "log" | "limit" | "quota" | "meter" | "queue" | "notrack" | "ct" | "snat" | "dnat" | "masquerade"
                | "redirect" | "mangle" | "set" | "fwd" | "dup" => {
                    return Err(self.err(e, format!("{k} is not supported by tern's stateless firewall")));
                }
                _ => return Err(self.err(e, format!("expression {k:?} is not supported"))),
            }
        }
        let noop = action.is_none() && !counter;
        let mut r = Rule::new(action.unwrap_or(RuleAction::Count));
        self.finish(acc, &mut r)?;
        Ok((r, noop))
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
        writeln!(f, "# Bind each rule set to interfaces with acl_in / acl_out.")?;
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
            for (r, h) in c.set.rules.iter().zip(&c.handles) {
                writeln!(f)?;
                writeln!(f, "# nft handle {h}")?;
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
