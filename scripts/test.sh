#!/usr/bin/env bash
# Runs every test of tern: formatting, lints, unit/property/integration
# tests (network-namespace tests need root), and the lab end to end.
# Installs what is missing first (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export CARGO_TERM_COLOR=never

step() { echo; echo "=== $* ($(date +%T))"; }

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

# Before the tests: tests/install.rs packages this build (scripts/deb.sh
# finds it current) instead of making its own.
step "release build"
cargo build --release -p tern

step "cargo test (debug)"
cargo test --workspace --no-fail-fast

step "tern lab (release)"
"${CARGO_TARGET_DIR:-target}/release/tern" lab

step "all tests passed"
