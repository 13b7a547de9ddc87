//! `acl` commands: rule sets, their bindings and hits.

use super::*;

pub fn acl_list(router: &Router, name: Option<&str>) -> Result<Vec<AclView>, ApiError> {
    if let Some(n) = name
        && !router.plan().acls.iter().any(|s| s.name == n)
    {
        return Err(ApiError::not_found(format!("no rule set named {}", crate::config::quote(n))));
    }
    let out = router
        .plan()
        .acls
        .iter()
        .filter(|s| name.is_none_or(|n| n == s.name))
        .map(|s| {
            let bound = |f: &dyn Fn(&crate::config::IfacePlan) -> Option<&String>| {
                router.plan().ifaces.iter().filter(|i| f(i) == Some(&s.name)).map(|i| i.name.clone()).collect()
            };
            let hits = router.acl_hits(&s.name);
            let rules = s
                .rules
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let mut v = match toml::Value::try_from(r) {
                        Ok(toml::Value::Table(t)) => t,
                        _ => toml::map::Map::new(),
                    };
                    v.remove("action");
                    let comment = v.remove("comment").and_then(|c| c.as_str().map(String::from));
                    let matches = v.iter().map(|(k, val)| format!("{k} {val}")).collect::<Vec<_>>().join(" ");
                    let h = hits.as_ref().and_then(|h| h.get(i)).copied().unwrap_or_default();
                    AclRuleView {
                        index: i,
                        action: format!("{:?}", r.action).to_lowercase(),
                        matches: if matches.is_empty() { "any".into() } else { matches },
                        comment,
                        packets: h.0,
                        bytes: h.1,
                    }
                })
                .collect();
            let d = hits.as_ref().and_then(|h| h.get(s.rules.len())).copied().unwrap_or_default();
            AclView {
                name: s.name.clone(),
                default: format!("{:?}", s.default).to_lowercase(),
                interfaces_in: bound(&|i| i.acl_in.as_ref()),
                interfaces_out: bound(&|i| i.acl_out.as_ref()),
                rules,
                default_packets: d.0,
                default_bytes: d.1,
                counting: hits.is_some(),
                lanes: router
                    .plan()
                    .live_ifaces()
                    .flat_map(|(_, i)| {
                        let mut v = Vec::new();
                        if i.acl_in.as_ref() == Some(&s.name) {
                            v.push(acl_lane(router, i, &s.name, "in"));
                        }
                        if i.acl_out.as_ref() == Some(&s.name) {
                            v.push(acl_lane(router, i, &s.name, "out"));
                        }
                        v
                    })
                    .collect(),
            }
        })
        .collect();
    Ok(out)
}

/// Replaces or adds a rule set, and binds it to the interfaces named, all
/// or nothing.
pub fn acl_set(router: &mut Router, a: AclSetArgs) -> Result<String, ApiError> {
    let idx = |l: &[String]| l.iter().map(|n| router.iface_by_name(n)).collect::<Result<Vec<u16>, _>>();
    let (ins, outs) = (idx(&a.bind_in)?, idx(&a.bind_out)?);
    let mut msg = router.replace_rule_set_bound(a.set, &ins, &outs)?;
    for (l, dir) in [(&a.bind_in, "in"), (&a.bind_out, "out")] {
        if !l.is_empty() {
            msg.push_str(&format!("; bound {dir} on {}", l.join(", ")));
        }
    }
    Ok(msg)
}
