#!/usr/bin/env bash
# IKEv2 setup rate (issue 40's figure): `tern-bench ike` (tern's own
# initiator, one engine) sets up TUNNELS tunnels (an IKE SA and its first
# child SA each; PSK, X25519, AES-GCM) against a responder, in one run:
#
#   cli ns [c0] 10.0.2.1 ---- 10.0.2.2 [r0] resp ns
#
# Responders:
#   swan   strongSwan's charon (Debian 5.9.8) with kernel-libipsec (this
#          kernel has no xfrm: the child SAs go into libipsec), one
#          connection taking any identity, `unique = never`, no policies
#          (every tunnel has the same selectors), DoS protection off (no
#          cookies), log level 0
#   tern   `tern-bench ike --respond`: tern's IKE engine as a bare
#          responder on a UDP socket (child SAs counted, not installed)
# CPUs: the generator on CPU 0, the responder on CPU 1. The responder's CPU
# time per tunnel is read from /proc (charon) or its own report (tern).
# Medians of RUNS by setups/s.
#
# Usage: sudo crates/bench/scripts/ike_setup_rate.sh [RUNS]
#   env: CASES ("swan tern"), TUNNELS (2000), WINDOW (64), PROPOSAL
#        (aes128gcm16-prfsha256-x25519), ESP (aes128gcm16), THREADS
#        (charon's, 16), BENCH (tern-bench; default: cargo build --release)
# Needs: root, iproute2, strongSwan (scripts/setup.sh). No python.
set -euo pipefail

RUNS=${1:-3}
read -r -a CASES <<<"${CASES:-swan tern}"
TUNNELS=${TUNNELS:-2000}
WINDOW=${WINDOW:-64}
PROPOSAL=${PROPOSAL:-aes128gcm16-prfsha256-x25519}
ESP=${ESP:-aes128gcm16}
THREADS=${THREADS:-16}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${BENCH:-}" ]; then
	(cd "$ROOT" && cargo build -q --release -p tern-bench)
	BENCH="$TGT/release/tern-bench"
fi
CHARON=/usr/lib/ipsec/charon
WORK=$(mktemp -d /tmp/ike_setup_rate.XXXXXX)
ID=$(($$ % 10000))
CLI=tswanike$ID-cli RSP=tswanike$ID-rsp
PSK=ike-setup-rate-psk
PIDS=()

stop_pids() {
	local p
	for p in "${PIDS[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
cleanup() {
	stop_pids
	for n in $CLI $RSP; do ip netns del "$n" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
field() { sed -n "s/.*\b$1=\([0-9.a-z_]*\).*/\1/p" "$2" | head -1; }
calc() { awk "BEGIN { print $1 }"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for n in $CLI $RSP; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip -n $CLI link add c0 type veth peer name r0 netns $RSP
ip -n $CLI addr add 10.0.2.1/24 dev c0
ip -n $RSP addr add 10.0.2.2/24 dev r0
ip -n $CLI link set c0 up
ip -n $RSP link set r0 up

start_charon() { # $1 dir
	local d=$1
	mkdir -p "$d" "$d"/{x509,x509ca,x509ocsp,x509aa,x509ac,x509crl,pubkey,private,rsa,ecdsa,bliss,pkcs8,pkcs12}
	cat >"$d/strongswan.conf" <<-EOF
		charon {
		  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey hmac sha1 sha2 kdf aes gcm socket-default vici kernel-libipsec kernel-netlink
		  threads = $THREADS
		  dos_protection = no
		  init_limit_half_open = 0
		  ikesa_table_size = 4096
		  ikesa_table_segments = 16
		  install_routes = no
		  filelog {
		    log {
		      path = $d/charon.log
		      default = 0
		    }
		  }
		  syslog {
		    daemon {
		      default = -1
		    }
		  }
		  plugins {
		    vici {
		      socket = unix://$d/charon.vici
		    }
		  }
		}
		swanctl {
		  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey kdf
		}
	EOF
	cat >"$d/swanctl.conf" <<-EOF
		connections {
		  bench {
		    local_addrs = 10.0.2.2
		    unique = never
		    proposals = $PROPOSAL
		    local {
		      auth = psk
		      id = swan.example
		    }
		    remote {
		      auth = psk
		    }
		    children {
		      net {
		        esp_proposals = $ESP
		        policies = no
		      }
		    }
		  }
		}
		secrets {
		  ike-any {
		    secret = "$PSK"
		  }
		}
	EOF
	STRONGSWAN_CONF=$d/strongswan.conf setsid ip netns exec $RSP taskset -c 1 unshare --mount --propagation private \
		sh -c "mount -t tmpfs tmpfs /run && exec $CHARON" >"$d/charon.out" 2>&1 &
	PIDS+=("$!")
	for _ in $(seq 200); do
		STRONGSWAN_CONF=$d/strongswan.conf swanctl --load-all --file "$d/swanctl.conf" --uri "unix://$d/charon.vici" \
			>"$d/load" 2>&1 && return 0
		sleep 0.05
	done
	echo "charon did not come up: $(cat "$d/charon.out" "$d/load")" >&2
	return 1
}

one_run() { # $1 case; prints "case tunnels established setups_per_sec retransmit_pct gen_cpu_us resp_cpu_us"
	local c=$1 out rpid t0 t1 hz resp_us
	out=$(mktemp -d "$WORK/run.XXXX")
	hz=$(getconf CLK_TCK)
	case $c in
	swan)
		start_charon "$out"
		rpid=${PIDS[-1]}
		;;
	tern)
		setsid ip netns exec $RSP taskset -c 1 "$BENCH" ike --respond --local 10.0.2.2 --psk $PSK \
			--proposal "$PROPOSAL" --esp-proposal "$ESP" --local-id tern.example --seconds 600 >"$out/resp" 2>&1 &
		rpid=$!
		PIDS+=("$rpid")
		for _ in $(seq 100); do ip netns exec $RSP ss -uln | grep -q ':500 ' && break; sleep 0.05; done
		;;
	esac
	t0=$(ticks "$rpid")
	ip netns exec $CLI taskset -c 0 "$BENCH" ike --local 10.0.2.1 --responder 10.0.2.2 --tunnels "$TUNNELS" \
		--window "$WINDOW" --psk $PSK --proposal "$PROPOSAL" --esp-proposal "$ESP" --timeout 300 >"$out/gen" 2>&1 || true
	t1=$(ticks "$rpid")
	local up
	up=$(field established "$out/gen")
	resp_us=$(calc "($t1 - $t0) / $hz * 1e6 / (${up:-0} > 0 ? ${up:-1} : 1)")
	echo "$c $TUNNELS ${up:-?} $(field setups_per_sec "$out/gen") $(field retransmit_pct "$out/gen") $(field cpu_us_per_tunnel "$out/gen") $resp_us"
	grep -q failure "$out/gen" && sed 's/^/    /' "$out/gen" | grep failure >&2
	stop_pids
	true
}

echo "# ike_setup_rate: RUNS=$RUNS TUNNELS=$TUNNELS WINDOW=$WINDOW proposal $PROPOSAL / $ESP"
echo "# responder tunnels established setups_per_sec retransmit_pct gen_cpu_us_per_tunnel resp_cpu_us_per_tunnel"
for c in "${CASES[@]}"; do
	: >"$WORK/res"
	for _ in $(seq "$RUNS"); do one_run "$c" >>"$WORK/res"; done
	sed 's/^/  run: /' "$WORK/res" >&2
	sort -k4 -g "$WORK/res" | awk -v n="$RUNS" 'NR == int((n + 1) / 2) { print }'
done
