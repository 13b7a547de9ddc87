//! The TOML rule parser on arbitrary input: never panics; what it accepts
//! serialises and parses back unchanged and compiles to a classifier that
//! agrees with the reference evaluator.
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(sets) = tern_acl::parse_toml(text) else { return };
    let doc = tern_acl::AclDocument { acl: sets.clone() };
    let again = toml::to_string(&doc).expect("serialises");
    assert_eq!(tern_acl::parse_toml(&again).expect("re-parses"), sets);
    for s in &sets {
        common::check(s, data);
    }
});
