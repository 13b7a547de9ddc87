//! Golden pcap tests: the whole graph runs on committed input pcaps and a
//! configuration; the frames each interface sends and the non-zero counters
//! must equal the committed expected files byte for byte.
//!
//! Layout: `tests/golden/<case>/config.toml` (memory interfaces, static
//! neighbours so nothing depends on timing), `in-<iface>.pcap` (made by
//! `make_inputs.py` with scapy), `out-<iface>.pcap` and `counters.txt`
//! (expected). The runner is `tern_testkit::golden`. Regenerate the
//! expected files only on purpose:
//! `TERN_BLESS=1 cargo test -p tern-control --test golden`, then review them
//! (`tshark -r out-lan.pcap -V`) before committing.

use std::path::PathBuf;
use tern_testkit::golden::{self, Check, Counters};

#[test]
fn golden_pcaps() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let cases = golden::cases(&root);
    assert!(cases.len() >= 3, "golden cases missing");
    let mut check = Check::new();
    for case in &cases {
        check.merge(golden::run_case(case, Counters::Errors));
    }
    check.finish();
}
