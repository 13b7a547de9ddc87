//! Stateless firewall: rule sets (tern's `[[acl]]` configuration), a
//! compiled classifier whose per-packet cost stays nearly flat from 1 to
//! 10,000 rules, per-rule hit counters, a reference evaluator, and an
//! importer for the stateless subset of an nftables ruleset.
//!
//! ```
//! use tern_acl::{compile, parse_toml, Action, PacketKey, RuleCounters};
//! let sets = parse_toml(r#"
//! [[acl]]
//! name = "TEST_IN"
//! default = "accept"
//! [[acl.rule]]
//! action = "drop"
//! src = "1.1.1.1/32"
//! proto = "udp"
//! dport = "1000-2000"
//! "#).unwrap();
//! let c = compile(&sets[0], &|_name| None).unwrap();
//! let key = PacketKey::v4([1, 1, 1, 1].into(), [10, 0, 0, 1].into(), 17).with_ports(5000, 1500);
//! let v = c.classify(&key);
//! assert_eq!((v.action, v.rule), (Action::Drop, Some(0)));
//! let counters = RuleCounters::for_classifier(&c);
//! counters.record(&c, &key, &v, 64);
//! assert_eq!(counters.rule(0).packets, 1);
//! ```
#![forbid(unsafe_code)]

mod bits;
mod classifier;
mod counters;
mod engine;
mod imap;
mod key;
pub mod linear;
mod lower;
pub mod names;
pub mod nft;
mod rule;
pub mod scenario;
pub mod synth;
pub mod value;
pub mod verdict;

pub use classifier::{Classifier, ClassifierStats, CompileOptions, Verdict, compile, compile_with};
pub use counters::{Hits, RuleCounters};
pub use engine::EngineStats;
pub use key::PacketKey;
pub use lower::{LRule as LoweredRule, NF as FIELD_COUNT, field_max, field_value, lower as lower_rules};
pub use rule::{
    AclDocument, AclError, Action, Family, MAX_RULES, PORT_PROTOCOLS, ParseError, Rule, RuleAction, RuleSet,
    parse_toml, validate_all,
};
pub use scenario::{scenario_50_drop_rules, scenario_50_drop_rules_v6, scenario_drop_test};
pub use verdict::{Generation, VerdictCache};
