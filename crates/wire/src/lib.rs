//! Zero-copy checked header views and small reprs for the protocols tern forwards
#![forbid(unsafe_code)]
