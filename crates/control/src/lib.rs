//! Configuration, control plane and API of tern
#![forbid(unsafe_code)]
