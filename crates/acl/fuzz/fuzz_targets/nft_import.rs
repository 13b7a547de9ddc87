//! The nftables JSON importer on arbitrary input: never panics; whatever it
//! accepts renders to TOML that parses back to the same rule sets, and
//! compiles to a classifier that agrees with the reference evaluator.
#![no_main]
use libfuzzer_sys::fuzz_target;

mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(imp) = tern_acl::nft::import(text) else { return };
    let rendered = imp.to_string();
    let back = tern_acl::parse_toml(&rendered).expect("rendered import parses");
    assert_eq!(back, imp.rule_sets());
    for s in &back {
        common::check(s, data);
    }
});
