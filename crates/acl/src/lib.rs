//! Stateless firewall rules and their compiled classifier
#![forbid(unsafe_code)]
