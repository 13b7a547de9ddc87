//! RIB, IPv4/IPv6 longest-prefix-match FIBs and next hops
#![forbid(unsafe_code)]
