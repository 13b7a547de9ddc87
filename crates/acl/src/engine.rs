//! Decomposition classifier (first version: a linear scan over lowered
//! rules; replaced by the table-driven engine).

use crate::classifier::{COUNTS_DYNAMIC, CompileOptions, Verdict};
use crate::key::PacketKey;
use crate::lower::LRule;
use crate::rule::{Action, RuleAction};

/// Shape and size of one family's compiled tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub mode: &'static str,
    pub rules: usize,
    pub memory_bytes: usize,
}

pub(crate) struct Engine {
    rules: Vec<LRule>,
    default: Action,
}

impl Engine {
    pub(crate) fn build(
        rules: &[LRule],
        _v6: bool,
        default: Action,
        _opts: &CompileOptions,
    ) -> Self {
        Engine {
            rules: rules.to_vec(),
            default,
        }
    }
    pub(crate) fn classify(&self, key: &PacketKey) -> Verdict {
        let mut counted = 0;
        for r in &self.rules {
            if r.matches(key) {
                match r.action.terminal() {
                    Some(a) => return Verdict::new(a, Some(r.idx), counted),
                    None => counted = COUNTS_DYNAMIC,
                }
            }
        }
        Verdict::new(self.default, None, counted)
    }
    pub(crate) fn classify_batch(&self, keys: &[PacketKey], out: &mut [Verdict]) {
        for (k, o) in keys.iter().zip(out.iter_mut()) {
            *o = self.classify(k);
        }
    }
    pub(crate) fn count_hits(&self, key: &PacketKey, v: &Verdict, f: &mut dyn FnMut(u32)) {
        let end = v.rule.unwrap_or(u32::MAX);
        for r in self.rules.iter().take_while(|r| r.idx < end) {
            if r.action == RuleAction::Count && r.matches(key) {
                f(r.idx);
            }
        }
    }
    pub(crate) fn stats(&self) -> EngineStats {
        EngineStats {
            mode: "linear",
            rules: self.rules.len(),
            memory_bytes: 0,
        }
    }
}
