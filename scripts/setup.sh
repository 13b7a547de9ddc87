#!/usr/bin/env bash
# Installs what tern's build and tests need on a fresh Debian 12 machine,
# skipping what is already there. Safe to run again.
set -euo pipefail

pkgs=(
  build-essential pkg-config       # C toolchain for BPF loaders and build scripts
  clang llvm libbpf-dev libelf-dev # BPF programs are C built with clang
  iproute2 iputils-ping ethtool    # network namespaces, veths, ping
  tshark python3-scapy nftables    # real peers and dissectors for tests
  frr bird2 keepalived             # FRR (zebra, bgpd) and BIRD as BGP peers, keepalived as the VRRP daemon, for the Linux-mode tests
  tmux                             # a real terminal for `tern top`'s test (tests/top_tmux.rs)
  iputils-arping                   # ARP probes during the overload test (tests/netns_overload.rs)
  # strongSwan as the IKEv2 / ESP peer (tern-testkit's strongswan rig, tests/netns_ike.rs,
  # crates/bench/scripts/ipsec_vs_strongswan.sh): charon, swanctl, the kernel-libipsec
  # data plane (libcharon-extra-plugins; this kernel has no xfrm) and the openssl plugin
  # (X25519, ECP, MODP; the curve25519 plugin of libstrongswan-extra-plugins is not needed)
  strongswan-charon strongswan-swanctl libcharon-extra-plugins libstrongswan-standard-plugins
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: installing Rust (rustup, stable)"
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  . "$HOME/.cargo/env"
fi
rustup component add clippy rustfmt >/dev/null 2>&1 || true
# cargo-deb builds the Debian package (scripts/deb.sh; tests/install.rs
# checks it). 3.8.0 builds on our Rust 1.95.
if ! cargo deb --version >/dev/null 2>&1; then
  echo "setup: installing cargo-deb"
  cargo install cargo-deb --version 3.8.0 --locked
fi

# bpffs for pinned maps (AF_XDP / XDP tests).
if ! mountpoint -q /sys/fs/bpf 2>/dev/null; then
  mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true
fi
# tracefs for tracepoint programs (the RFC 2544 tester's hole watch on
# sched_switch); some machines boot without it mounted.
if [ ! -e /sys/kernel/tracing/events ] && ! mountpoint -q /sys/kernel/tracing 2>/dev/null; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
echo "setup: ok"
