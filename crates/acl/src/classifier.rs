//! The compiled classifier: the public face. See [`crate::engine`] for how
//! lookups work and what they cost.

use crate::engine::{Engine, EngineStats};
use crate::key::PacketKey;
use crate::lower::{LRule, lower};
use crate::rule::{AclError, Action, RuleAction, RuleSet};

/// The decision for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub action: Action,
    /// Index of the deciding terminal rule; `None` when the default policy
    /// decided.
    pub rule: Option<u32>,
    /// Which count-only rules matched: 0 none, otherwise a token that
    /// [`Classifier::count_hits`] expands.
    pub(crate) counts: u32,
}

impl Verdict {
    pub(crate) const fn new(action: Action, rule: Option<u32>, counts: u32) -> Self {
        Verdict { action, rule, counts }
    }
    /// Whether count-only rules matched (then [`Classifier::count_hits`] or
    /// [`crate::RuleCounters::record`] reports them).
    #[inline]
    pub fn counted(&self) -> bool {
        self.counts != 0
    }
}

impl Default for Verdict {
    fn default() -> Self {
        Verdict::new(Action::Accept, None, 0)
    }
}

/// Token for "count-only rules matched; walk again to list them".
pub(crate) const COUNTS_DYNAMIC: u32 = u32::MAX;

/// Knobs of [`compile_with`]; the defaults suit production.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Largest cross-product table (entries) the compiler may build; beyond
    /// it the last stage checks a short candidate list instead.
    pub table_budget: usize,
    /// Rule sets (per address family) of at most this many rules (and at
    /// most 256) use bitmap mode: per-field rule bitmaps ANDed, no
    /// cross-product tables.
    pub bitmap_rules: usize,
    /// Build the reference linear scan instead of the decomposition
    /// classifier (for benchmarks and tests).
    pub linear: bool,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions { table_budget: 1 << 22, bitmap_rules: 256, linear: false }
    }
}

/// Shape and size of a compiled classifier, for `tern acl show` and the
/// benchmark report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassifierStats {
    pub v4: EngineStats,
    pub v6: EngineStats,
}

impl ClassifierStats {
    /// Bytes of lookup tables.
    pub fn memory_bytes(&self) -> usize {
        self.v4.memory_bytes + self.v6.memory_bytes
    }
}

enum Program {
    Linear(Vec<LRule>),
    Engine(Box<Engine>),
}

/// A rule set compiled for fast classification. Immutable: recompile and
/// publish a new one (e.g. through `tern_rcu::Published`) on change.
pub struct Classifier {
    name: String,
    default: Action,
    rules: usize,
    v4: Program,
    v6: Program,
}

/// Compiles a rule set; `ifindex` maps interface names to tern interface
/// indices (an unknown name is an error).
pub fn compile(set: &RuleSet, ifindex: &dyn Fn(&str) -> Option<u16>) -> Result<Classifier, AclError> {
    compile_with(set, ifindex, &CompileOptions::default())
}

/// [`compile`] with explicit options.
pub fn compile_with(
    set: &RuleSet,
    ifindex: &dyn Fn(&str) -> Option<u16>,
    opts: &CompileOptions,
) -> Result<Classifier, AclError> {
    set.validate()?;
    let build = |v6: bool| -> Result<Program, AclError> {
        let rules = lower(set, ifindex, v6)?;
        Ok(if opts.linear {
            Program::Linear(rules)
        } else {
            Program::Engine(Box::new(Engine::build(&rules, v6, set.default, opts)))
        })
    };
    Ok(Classifier {
        name: set.name.clone(),
        default: set.default,
        rules: set.rules.len(),
        v4: build(false)?,
        v6: build(true)?,
    })
}

impl Classifier {
    /// Name of the rule set.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Number of rules of the rule set (for sizing [`crate::RuleCounters`]).
    pub fn rule_count(&self) -> usize {
        self.rules
    }
    /// The default policy.
    pub fn default_action(&self) -> Action {
        self.default
    }

    /// Classifies one packet.
    #[inline]
    pub fn classify(&self, key: &PacketKey) -> Verdict {
        let p = if key.is_v6 { &self.v6 } else { &self.v4 };
        match p {
            Program::Engine(e) => e.classify(key),
            Program::Linear(r) => linear(r, self.default, key),
        }
    }

    /// Classifies a batch: `out[i]` gets the verdict of `keys[i]` (up to
    /// the shorter of the two). Faster per packet than [`Self::classify`]
    /// because lookups of several packets are in flight at once.
    pub fn classify_batch(&self, keys: &[PacketKey], out: &mut [Verdict]) {
        let n = keys.len().min(out.len());
        let (keys, out) = (&keys[..n], &mut out[..n]);
        // Runs of one family go to that family's program in one call.
        let mut start = 0;
        while start < n {
            let v6 = keys[start].is_v6;
            let end = keys[start..].iter().position(|k| k.is_v6 != v6).map_or(n, |p| start + p);
            let (k, o) = (&keys[start..end], &mut out[start..end]);
            match if v6 { &self.v6 } else { &self.v4 } {
                Program::Engine(e) => e.classify_batch(k, o),
                Program::Linear(r) => {
                    for (k, o) in k.iter().zip(o.iter_mut()) {
                        *o = linear(r, self.default, k);
                    }
                }
            }
            start = end;
        }
    }

    /// Calls `f` with the index of every count-only rule the packet matched
    /// before its deciding rule, in rule order.
    pub fn count_hits(&self, key: &PacketKey, v: &Verdict, mut f: impl FnMut(u32)) {
        if v.counts == 0 {
            return;
        }
        let p = if key.is_v6 { &self.v6 } else { &self.v4 };
        match p {
            Program::Engine(e) => e.count_hits(key, v, &mut f),
            Program::Linear(rules) => {
                let end = v.rule.unwrap_or(u32::MAX);
                for r in rules.iter().take_while(|r| r.idx < end) {
                    if r.action == RuleAction::Count && r.matches(key) {
                        f(r.idx);
                    }
                }
            }
        }
    }

    /// Shape and memory of the compiled tables.
    pub fn stats(&self) -> ClassifierStats {
        let s = |p: &Program| match p {
            Program::Engine(e) => e.stats(),
            Program::Linear(r) => EngineStats { mode: "linear", rules: r.len(), ..Default::default() },
        };
        ClassifierStats { v4: s(&self.v4), v6: s(&self.v6) }
    }
}

impl std::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.debug_struct("Classifier")
            .field("name", &self.name)
            .field("rules", &self.rules)
            .field("stats", &self.stats())
            .finish()
    }
}

// Workers share one classifier through `Arc` (RCU publication).
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Classifier>();
};

fn linear(rules: &[LRule], default: Action, key: &PacketKey) -> Verdict {
    let mut counted = 0;
    for r in rules {
        if r.matches(key) {
            match r.action.terminal() {
                Some(a) => return Verdict::new(a, Some(r.idx), counted),
                None => counted = COUNTS_DYNAMIC,
            }
        }
    }
    Verdict::new(default, None, counted)
}
