//! The rule model: named rule sets of ordered rules with a default policy,
//! as written in tern's TOML configuration (`[[acl]]` tables with
//! `[[acl.rule]]` arrays; see `crates/acl/README.md` for the schema).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::value::{
    DscpRange, IcmpCodeRange, IcmpTypeRange, Icmpv6CodeRange, Icmpv6TypeRange, IfName, List, PortRange, Prefix,
    ProtoRange, TcpFlags, VlanRange,
};

/// What happens to a packet: the verdict of a terminal rule or the default
/// policy of a rule set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    #[default]
    Accept,
    Drop,
}

/// A rule's action. `Count` is not terminal: the rule counts its hits and
/// evaluation continues with the next rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleAction {
    Accept,
    Drop,
    Count,
}

impl RuleAction {
    /// The verdict of a terminal action, `None` for `Count`.
    pub fn terminal(self) -> Option<Action> {
        match self {
            RuleAction::Accept => Some(Action::Accept),
            RuleAction::Drop => Some(Action::Drop),
            RuleAction::Count => None,
        }
    }
}

/// IP version a rule is restricted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

/// A named rule set: ordered rules, first terminal match wins, else the
/// default policy. Interfaces bind rule sets by name (`acl_in`/`acl_out`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSet {
    pub name: String,
    /// Verdict for packets no terminal rule matches.
    pub default: Action,
    #[serde(default, rename = "rule", skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
}

/// One rule. Every key is optional; an absent key matches everything, a
/// present key matches if any of its listed values matches, and the rule
/// matches if all its present keys match.
///
/// Keys that read the transport header (`sport`, `dport`, `icmp_*`,
/// `icmpv6_*`, `tcp_flags`) never match a packet whose transport header is
/// missing (a non-first fragment, a truncated packet), nor a packet of a
/// protocol that has no such field: ports exist for TCP, UDP, SCTP, UDP-Lite
/// and DCCP; `icmp_*` implies protocol 1, `icmpv6_*` protocol 58 and
/// `tcp_flags` protocol 6.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub action: RuleAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<Family>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<List<Prefix>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<List<Prefix>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<List<ProtoRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sport: Option<List<PortRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dport: Option<List<PortRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_type: Option<List<IcmpTypeRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp_code: Option<List<IcmpCodeRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmpv6_type: Option<List<Icmpv6TypeRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmpv6_code: Option<List<Icmpv6CodeRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_flags: Option<List<TcpFlags>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iif: Option<List<IfName>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oif: Option<List<IfName>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<List<VlanRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dscp: Option<List<DscpRange>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl Rule {
    /// A rule with the given action and no match keys (matches everything).
    pub fn new(action: RuleAction) -> Self {
        Rule {
            action,
            family: None,
            src: None,
            dst: None,
            proto: None,
            sport: None,
            dport: None,
            icmp_type: None,
            icmp_code: None,
            icmpv6_type: None,
            icmpv6_code: None,
            tcp_flags: None,
            iif: None,
            oif: None,
            vlan: None,
            dscp: None,
            comment: None,
        }
    }

    /// Whether the rule can match packets of this IP version: its `family`
    /// and every address key it has must allow it.
    pub fn allows_family(&self, v6: bool) -> bool {
        let fam_ok = match self.family {
            Some(Family::Ipv4) => !v6,
            Some(Family::Ipv6) => v6,
            None => true,
        };
        let list_ok = |l: &Option<List<Prefix>>| l.as_ref().is_none_or(|l| l.iter().any(|p| p.is_v6() == v6));
        fam_ok && list_ok(&self.src) && list_ok(&self.dst)
    }
}

/// The protocols that carry 16-bit source and destination ports in the first
/// four bytes of their header: TCP (6), UDP (17), DCCP (33), SCTP (132),
/// UDP-Lite (136).
pub const PORT_PROTOCOLS: [u8; 5] = [6, 17, 33, 132, 136];

/// A validation error: names the rule set, the rule (index in the set,
/// 0-based: the n-th `[[acl.rule]]` table is index n-1) and the key, so the
/// configuration loader can point at the file and line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclError {
    pub set: String,
    pub rule: Option<usize>,
    pub key: Option<&'static str>,
    pub message: String,
}

impl AclError {
    pub(crate) fn new(set: &str, rule: Option<usize>, key: Option<&'static str>, message: impl Into<String>) -> Self {
        AclError { set: set.to_string(), rule, key, message: message.into() }
    }
}

impl fmt::Display for AclError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "acl {:?}", self.set)?;
        if let Some(r) = self.rule {
            write!(f, ", rule {r} (the {} [[acl.rule]])", ordinal(r + 1))?;
        }
        if let Some(k) = self.key {
            write!(f, ", key {k:?}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for AclError {}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A standalone document of rule sets (`[[acl]]` tables). tern's full
/// configuration embeds the same `acl` array.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclDocument {
    #[serde(default)]
    pub acl: Vec<RuleSet>,
}

/// Error of [`parse_toml`]: a TOML/syntax error (with line and column) or a
/// validation error.
#[derive(Debug)]
pub enum ParseError {
    Toml(toml::de::Error),
    Invalid(AclError),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            ParseError::Toml(e) => write!(f, "{e}"),
            ParseError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Parses and validates a document of `[[acl]]` tables.
pub fn parse_toml(text: &str) -> Result<Vec<RuleSet>, ParseError> {
    let doc: AclDocument = toml::from_str(text).map_err(ParseError::Toml)?;
    validate_all(&doc.acl).map_err(ParseError::Invalid)?;
    Ok(doc.acl)
}

/// Validates several rule sets and that their names are unique.
pub fn validate_all(sets: &[RuleSet]) -> Result<(), AclError> {
    for (i, s) in sets.iter().enumerate() {
        s.validate()?;
        if sets[..i].iter().any(|o| o.name == s.name) {
            return Err(AclError::new(&s.name, None, Some("name"), "another [[acl]] has the same name"));
        }
    }
    Ok(())
}

impl RuleSet {
    /// A rule set with no rules.
    pub fn new(name: impl Into<String>, default: Action) -> Self {
        RuleSet { name: name.into(), default, rules: Vec::new() }
    }

    /// Checks what deserialisation cannot: non-empty names and lists, and
    /// that each rule can match at least one packet (its keys agree on the
    /// address family and the protocol). Interface names are checked by
    /// [`crate::compile`], which knows the interfaces.
    pub fn validate(&self) -> Result<(), AclError> {
        if self.name.trim().is_empty() {
            return Err(AclError::new(&self.name, None, Some("name"), "the rule set name is empty"));
        }
        if self.rules.len() > MAX_RULES {
            return Err(AclError::new(
                &self.name,
                None,
                Some("rule"),
                format!("{} rules; at most {MAX_RULES} are supported", self.rules.len()),
            ));
        }
        for (i, r) in self.rules.iter().enumerate() {
            validate_rule(&self.name, i, r)?;
        }
        Ok(())
    }
}

/// Most rules a rule set may have (compile time and memory are measured up
/// to 10,000; this bound keeps a typo from asking for much more).
pub const MAX_RULES: usize = 65_536;

fn validate_rule(set: &str, i: usize, r: &Rule) -> Result<(), AclError> {
    let err = |key: &'static str, msg: String| Err(AclError::new(set, Some(i), Some(key), msg));
    macro_rules! nonempty {
        ($($k:ident),*) => {$(
            if r.$k.as_ref().is_some_and(|l| l.is_empty()) {
                return err(stringify!($k), "the list is empty, so the rule could never match".into());
            }
        )*};
    }
    nonempty!(
        src,
        dst,
        proto,
        sport,
        dport,
        icmp_type,
        icmp_code,
        icmpv6_type,
        icmpv6_code,
        tcp_flags,
        iif,
        oif,
        vlan,
        dscp
    );

    if !r.allows_family(false) && !r.allows_family(true) {
        let key = if r.dst.is_some() { "dst" } else { "src" };
        return err(
            key,
            "no address family is allowed by family, src and dst together: the rule could never match".into(),
        );
    }
    let icmp4 = r.icmp_type.is_some() || r.icmp_code.is_some();
    let icmp6 = r.icmpv6_type.is_some() || r.icmpv6_code.is_some();
    if icmp4 && icmp6 {
        return err("icmpv6_type", "a rule cannot match both ICMP and ICMPv6 fields".into());
    }
    let ports = r.sport.is_some() || r.dport.is_some();
    type Check<'a> = (bool, &'static str, &'a dyn Fn(u32) -> bool, &'a str);
    let checks: [Check; 4] = [
        (
            ports,
            if r.dport.is_some() { "dport" } else { "sport" },
            &|p| PORT_PROTOCOLS.contains(&(p as u8)),
            "a protocol with ports (tcp, udp, sctp, udplite, dccp)",
        ),
        (r.tcp_flags.is_some(), "tcp_flags", &|p| p == 6, "tcp"),
        (icmp4, if r.icmp_type.is_some() { "icmp_type" } else { "icmp_code" }, &|p| p == 1, "icmp"),
        (icmp6, if r.icmpv6_type.is_some() { "icmpv6_type" } else { "icmpv6_code" }, &|p| p == 58, "icmpv6"),
    ];
    let mut allowed: Vec<bool> =
        (0..=255u32).map(|p| r.proto.as_ref().is_none_or(|l| l.iter().any(|x| x.contains(p)))).collect();
    for (present, key, ok, needs) in checks {
        if !present {
            continue;
        }
        for (p, a) in allowed.iter_mut().enumerate() {
            *a = *a && ok(p as u32);
        }
        if !allowed.iter().any(|&a| a) {
            return err(
                key,
                format!("needs {needs}, which the rule's proto (and other keys) exclude: the rule could never match"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
[[acl]]
name = "TEST_IN"
default = "accept"

[[acl.rule]]
action = "drop"
src = "1.1.1.1/32"
proto = "udp"
dport = "1000-2000"

[[acl.rule]]
action = "count"
dst = ["10.0.0.0/8", "2001:db8::/32"]
tcp_flags = "syn,!ack"
comment = "new TCP connections"
"#;

    #[test]
    fn parses_the_readme_example() {
        let sets = parse_toml(EXAMPLE).unwrap();
        assert_eq!(sets.len(), 1);
        let s = &sets[0];
        assert_eq!(s.name, "TEST_IN");
        assert_eq!(s.default, Action::Accept);
        assert_eq!(s.rules.len(), 2);
        assert_eq!(s.rules[0].action, RuleAction::Drop);
        assert_eq!(s.rules[0].dport.as_ref().unwrap().0[0].hi, 2000);
        assert_eq!(s.rules[1].dst.as_ref().unwrap().len(), 2);
    }

    #[test]
    fn syntax_errors_carry_lines() {
        let bad = EXAMPLE.replace("1000-2000", "1000-x");
        let e = parse_toml(&bad).unwrap_err().to_string();
        assert!(e.contains("line 10"), "{e}");
        let bad = EXAMPLE.replace("proto = \"udp\"", "protocol = \"udp\"");
        assert!(parse_toml(&bad).is_err());
    }

    #[test]
    fn validation_names_set_rule_and_key() {
        let bad = EXAMPLE.replace("proto = \"udp\"", "proto = \"icmp\"");
        let ParseError::Invalid(e) = parse_toml(&bad).unwrap_err() else { panic!("expected a validation error") };
        assert_eq!((e.set.as_str(), e.rule, e.key), ("TEST_IN", Some(0), Some("dport")));
        assert!(e.to_string().contains("the 1st [[acl.rule]]"), "{e}");

        let mut r = Rule::new(RuleAction::Drop);
        r.src = Some(List::one("1.1.1.1".parse().unwrap()));
        r.dst = Some(List::one("::1".parse().unwrap()));
        let mut s = RuleSet::new("X", Action::Drop);
        s.rules.push(r);
        assert_eq!(s.validate().unwrap_err().key, Some("dst"));

        let mut r = Rule::new(RuleAction::Drop);
        r.icmp_type = Some(List::one(crate::value::Item::from_int(8).unwrap()));
        r.icmpv6_type = Some(List::one(crate::value::Item::from_int(128).unwrap()));
        s.rules = vec![r];
        assert_eq!(s.validate().unwrap_err().key, Some("icmpv6_type"));

        let mut r = Rule::new(RuleAction::Drop);
        r.tcp_flags = Some(List::one(crate::value::Item::from_text("syn").unwrap()));
        r.proto = Some(List::one(crate::value::Item::from_text("udp").unwrap()));
        s.rules = vec![r];
        assert_eq!(s.validate().unwrap_err().key, Some("tcp_flags"));
    }

    #[test]
    fn duplicate_names_are_refused() {
        let two = format!("{EXAMPLE}\n[[acl]]\nname = \"TEST_IN\"\ndefault = \"drop\"\n");
        let ParseError::Invalid(e) = parse_toml(&two).unwrap_err() else { panic!("expected a validation error") };
        assert_eq!(e.key, Some("name"));
    }
}
