//! Fuzz target `icmpv6_nd`: checked view, every getter, Repr parse and the
//! emit -> parse round trip (see `tests/exercise/mod.rs`).
#![no_main]

#[path = "../../tests/exercise/mod.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| exercise::icmpv6_nd(data));
