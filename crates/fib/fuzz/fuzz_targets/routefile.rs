//! Route files come from users: any bytes must give routes or an error
//! naming a line, never a panic. Whatever parses must print back to the
//! same prefix.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match tern_fib::routefile::parse(data) {
        Ok(routes) => {
            for (p, gw) in routes {
                let again: tern_fib::Prefix = p.to_string().parse().expect("a parsed prefix prints back");
                assert_eq!(again, p);
                if let Some(gw) = gw {
                    assert_eq!(gw.is_ipv4(), p.is_v4(), "gateway family checked");
                }
            }
        }
        Err(e) => {
            let lines = data.split(|&b| b == b'\n').count().max(1);
            assert!(e.line() <= lines, "error line {} past the end ({lines} lines)", e.line());
            let _ = e.to_string();
        }
    }
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = s.parse::<tern_fib::Prefix>();
    }
});
