#!/usr/bin/env bash
# Builds the Debian package of tern: target/debian/tern_VERSION_ARCH.deb
# (its path is the last line printed). Install it with
#   apt install ./target/debian/tern_*.deb
# The release binary, then the man pages and shell completions made by
# that binary (`tern man`, `tern completions`: they match the CLI it
# packages), then cargo-deb with crates/tern/Cargo.toml's
# [package.metadata.deb] (what goes where). Needs cargo-deb
# (scripts/setup.sh installs it). Extra arguments go to `cargo deb`.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo deb --version >/dev/null 2>&1; then
  echo "deb.sh: cargo-deb is missing: cargo install cargo-deb --version 3.8.0 --locked (scripts/setup.sh does it)" >&2
  exit 1
fi
target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p tern
bin=$target/release/tern
gen=$target/release/packaging
rm -rf "$gen"
mkdir -p "$gen/man" "$gen/completions"
"$bin" man --dir "$gen/man"
# (cargo-deb compresses man pages only when they are not under target/.)
gzip -9n "$gen/man"/*.1
"$bin" completions bash >"$gen/completions/tern.bash"
"$bin" completions zsh >"$gen/completions/_tern"
"$bin" completions fish >"$gen/completions/tern.fish"
cargo deb -p tern --no-build "$@"
