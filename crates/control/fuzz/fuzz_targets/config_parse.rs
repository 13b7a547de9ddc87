//! The configuration parser (`tern_control::config::parse`) on arbitrary
//! text: it must never panic; an error must say something and any line and
//! column it reports must lie inside the text; an accepted configuration
//! must parse to the same plan again. `crates/control/tests/config_hostile.rs`
//! checks the same on stable, on mutants of valid configurations.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use tern_control::config::{ConfigError, Plan, parse};

const FILE: &str = "fuzz.toml";

fn parse_text(text: &str) -> Result<Plan, ConfigError> {
    parse(text, FILE, Path::new("/nonexistent"))
}

fn check_error(text: &str, e: &ConfigError) {
    assert!(!e.message.trim().is_empty(), "an empty message: {e:?}");
    assert!(!e.message.contains('\n'), "a message of several lines: {e:?}");
    assert!(!e.to_string().trim().is_empty());
    assert_eq!(e.file, FILE);
    assert!(e.column.is_none() || e.line.is_some(), "a column without a line: {e:?}");
    if let Some(line) = e.line {
        let lines: Vec<&str> = text.split('\n').collect();
        assert!((1..=lines.len()).contains(&line), "line {line} of {}: {e:?}", lines.len());
        if let Some(col) = e.column {
            let l = lines[line - 1];
            let chars = l.chars().count();
            assert!((1..=chars + 1).contains(&col), "column {col} of {chars} characters on line {line}: {e:?}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse_text(text) {
        Ok(plan) => {
            let again = parse_text(text).expect("an accepted configuration is accepted again");
            assert!(plan == again, "two parses, two plans");
        }
        Err(e) => {
            check_error(text, &e);
            assert_eq!(parse_text(text).err(), Some(e), "two parses, two errors");
        }
    }
});
