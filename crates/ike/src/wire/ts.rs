//! Traffic selectors (RFC 7296 3.13.1).
