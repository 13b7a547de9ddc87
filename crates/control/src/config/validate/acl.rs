//! `[[acl]]`: rule sets, checked whole before interfaces bind them.

use crate::config::{Problem, Seg, bad, k, quote};
use std::collections::HashSet;

/// Checks the rule sets; returns their names.
pub(super) fn rule_sets(sets: &[tern_acl::RuleSet]) -> Result<HashSet<&str>, Problem> {
    // Before the sets' own checks, so the error names the second of two.
    for (i, s) in sets.iter().enumerate() {
        if sets[..i].iter().any(|o| o.name == s.name) {
            return Err(bad(
                vec![k("acl"), Seg::Index(i), k("name")],
                format!("another [[acl]] is named {}", quote(&s.name)),
            ));
        }
    }
    if let Err(e) = tern_acl::validate_all(sets) {
        let i = sets.iter().position(|s| s.name == e.set).unwrap_or(0);
        let mut path = vec![k("acl"), Seg::Index(i)];
        if let Some(r) = e.rule {
            path.push(k("rule"));
            path.push(Seg::Index(r));
        }
        if let Some(key) = e.key {
            path.push(k(key));
        }
        return Err(bad(path, e.message));
    }
    Ok(sets.iter().map(|s| s.name.as_str()).collect())
}
