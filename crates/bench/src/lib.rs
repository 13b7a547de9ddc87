//! Traffic generator, RFC 2544 searches and reports
#![forbid(unsafe_code)]
