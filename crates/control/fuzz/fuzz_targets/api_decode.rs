//! The API request decoder on arbitrary bytes: it must never panic, and a
//! request it accepts must survive encode -> decode unchanged (so what the
//! server runs is exactly what the peer sent).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tern_control::api::{decode_request, encode_request, peek_id};

fuzz_target!(|data: &[u8]| {
    let _ = peek_id(data);
    if let Ok(req) = decode_request(data) {
        let line = encode_request(req.id, &req.cmd);
        let again = decode_request(line.trim_end().as_bytes()).expect("an encoded request decodes");
        assert_eq!(again, req);
    }
});
