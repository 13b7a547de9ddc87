#!/usr/bin/env bash
# The XDP lane against its peers on the 3-namespace veth rig (the rig of
# xsk_rig.sh, with the addresses of tern-bench's topology):
#
#   gen ns  [g0] ---- [r0]  router ns  [r1] ---- [s0]  sink ns
#   10.10.1.2       10.10.1.1       10.10.2.1       10.10.2.2
#
# Traffic: the 100GE scenarios of tern-bench (`tern-bench gen`: the
# tester's XDP generator, BPF_PROG_TEST_RUN live frames, flows varied in
# the program), 64-byte frames, flat out. The sink counts with the tester's
# XDP receiver (`tern-bench sink`). CPU 0: generator and sink; CPU 1: the
# router.
#
# Cases (the router):
#   lane    tern run, lane = "xdp" (the XDP lane; worker idle = sleep)
#   user    tern run, lane = "afxdp", idle = "spin" (the userspace lane,
#           busy polling, its worker on CPU 1). A veth links no NAPI to
#           its queues: the script teaches tern's helper socket the NAPI id
#           with UDP broadcasts to port 9 from the generator's namespace
#           (python3) and leaves r0's NAPI unthreaded (tern drives it).
#   xsk     tern-bench xsk-fwd (src/rig/xsk_fwd.rs): the least an AF_XDP
#           forwarder does, on tern's own AF_XDP driver (MAC rewrite, no
#           routing, no TTL, no firewall), busy polling like `user`: what
#           AF_XDP itself costs on this rig, the floor under `user`;
#           kernel addresses on r0/r1 so that its probe packets (UDP to
#           port 9 of 10.10.1.1) reach the helper socket; "n/a" for gre,
#           and in drop-test it forwards the blocked half too
#   xdp-fwd in-kernel XDP forwarding with bpf_fib_lookup (`tern-bench
#           xdp-fwd`: the tester's xdp-fwd DUT, bpf/xdpfwd.bpf.c, its
#           firewall empty; kernel addresses, routes, neighbour); no
#           firewall, no GRE (no ip_gre module here): "n/a" for gre
#   linux   kernel forwarding (ip_forward=1), no firewall; "n/a" for gre
#
# Scenarios: single-flow-50fw, gre-multi-flow, 900k-routes-50fw, drop-test
# (tern: the 50 rules `drop src 1.1.N.1`; drop-test: + accept 10.10.1.0/24,
# default drop; 900k: the full table from ../shared/data; gre: every packet
# encapsulated to 10.10.2.2). The sink counts what arrives, so in the drop
# test the forwarded (legitimate) half.
#
# Router CPU ns/packet = CPU time in the window of the router's threads
# (r0's and r1's NAPI kthreads, pinned to CPU 1; tern's process) plus
# softirq time on CPU 1, per packet counted at the sink. Medians of RUNS.
#
# Usage: sudo crates/bench/scripts/lane_rig.sh [RUNS] [SCENARIO...]
#   env: CASES ("lane user xdp-fwd linux"), WARMUP (s, 2), MEASURE (s, 5),
#        GEN_ARGS (more `tern-bench gen` options, e.g. "--dsts 4096"),
#        TERN (binary; default: cargo build --release -p tern), BENCH
#        (tern-bench; default: cargo build --release -p tern-bench),
#        ROUTES (full table, default /work/shared/data/full-table-2025.txt.gz),
#        PERF (a path prefix: `perf record -g` of tern over the measuring
#        window into PREFIX.CASE.data), SCRATCH (a path prefix: the lane's
#        per-CPU scratch map, with its memos' miss rates, dumped by bpftool
#        at the end of each lane window into PREFIX.SCENARIO.TIME.json,
#        the lane's counters at the start and end of the window
#        (.ctr0.json, .ctr.json), its interface table (.ifs.json), tern's
#        counters (`tern stats`, .stats) and log (.log))
# Needs: root, iproute2, ethtool, Linux 5.18+ (SCRATCH: bpftool).
set -euo pipefail

RUNS=${1:-3}
shift || true
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -eq 0 ] && SCENARIOS=(single-flow-50fw gre-multi-flow 900k-routes-50fw drop-test)
read -r -a CASES <<<"${CASES:-lane user xdp-fwd linux}"
WARMUP=${WARMUP:-2}
MEASURE=${MEASURE:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
ROUTES=${ROUTES:-$ROOT/../shared/data/full-table-2025.txt.gz}
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${TERN:-}" ]; then
	(cd "$ROOT" && cargo build -q --release -p tern)
	TERN="$TGT/release/tern"
fi
if [ -z "${BENCH:-}" ]; then
	(cd "$ROOT" && cargo build -q --release -p tern-bench)
	BENCH="$TGT/release/tern-bench"
fi
WORK=$(mktemp -d /tmp/lane_rig.XXXXXX)

ID=$(($$ % 10000))
GEN=tlanerig$ID-gen RTR=tlanerig$ID-rtr SNK=tlanerig$ID-snk
# Names unique on the machine: NAPI kthreads are named after them.
G0=k${ID}g0 R0=k${ID}r0 R1=k${ID}r1 S0=k${ID}s0
MAC_G0=02:00:00:00:00:11 MAC_R0=02:00:00:00:00:10 MAC_R1=02:00:00:00:00:20 MAC_S0=02:00:00:00:00:21
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for n in $GEN $RTR $SNK; do ip netns del "$n" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
calc() { awk "BEGIN { print $1 }"; }

setup() {
	for n in $GEN $RTR $SNK; do ip netns add "$n"; ip -n "$n" link set lo up; done
	ip -n $RTR link add $R0 address $MAC_R0 type veth peer name $G0 address $MAC_G0 netns $GEN
	ip -n $RTR link add $R1 address $MAC_R1 type veth peer name $S0 address $MAC_S0 netns $SNK
	for d in $R0 $R1; do ip -n $RTR link set $d up; done
	ip -n $GEN link set $G0 up
	ip -n $SNK link set $S0 up
	ip -n $GEN addr add 10.10.1.2/24 dev $G0
	ip -n $SNK addr add 10.10.2.2/24 dev $S0
	nsx $GEN ethtool -K $G0 tx off >/dev/null
}

napi_threaded() { nsx "$1" sh -c "echo 1 > /sys/class/net/$2/threaded"; }
napi_pids() { pgrep -f "napi/$1-" || true; }
pin_napi() { for p in $(napi_pids "$1"); do taskset -pc "$2" "$p" >/dev/null; done; }
ticks() { local t=0 p; for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
sirq1() { awk '/^cpu1 / {print $8}' /proc/stat; }
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2" | head -1; }

tern_config() { # $1 = scenario, $2 = case, $3 = work dir
	local sc=$1 c=$2 lane idle
	if [ "$c" = lane ]; then lane=xdp idle=sleep; else lane=afxdp idle=spin; fi
	cat <<-EOF
		[dataplane]
		workers = 1
		cpus = [1]
		idle = "$idle"

		[api]
		socket = "$3/tern.sock"

		[[interface]]
		name = "in0"
		device = "$R0"
		lane = "$lane"
		addresses = ["10.10.1.1/24", "2001:db8:10:1::1/64"]
	EOF
	echo 'acl_in = "FW50"'
	cat <<-EOF

		[[interface]]
		name = "out0"
		device = "$R1"
		lane = "$lane"
		addresses = ["10.10.2.1/24", "2001:db8:10:2::1/64"]

		[[neighbor_entry]]
		interface = "out0"
		address = "10.10.2.2"
		mac = "$MAC_S0"

	EOF
	if [ "$sc" = gre-multi-flow ]; then
		printf '[[tunnel]]\nname = "gre0"\nlocal = "10.10.2.1"\nremote = "10.10.2.2"\naddresses = ["192.168.255.1/30"]\n\n'
		printf '[[route]]\nprefix = "198.18.0.0/15"\nvia = "192.168.255.2"\n\n'
	else
		printf '[[route]]\nprefix = "198.18.0.0/15"\nvia = "10.10.2.2"\n\n'
	fi
	if [ "$sc" = 900k-routes-50fw ]; then
		printf '[[route_file]]\npath = "%s"\nvia = "10.10.2.2"\nvia6 = "2001:db8:10:2::2"\n\n' "$ROUTES"
	fi
	local def=accept
	[ "$sc" = drop-test ] && def=drop
	printf '[[acl]]\nname = "FW50"\ndefault = "%s"\n\n' $def
	for n in $(seq 1 50); do printf '[[acl.rule]]\naction = "drop"\nsrc = "1.1.%d.1/32"\n\n' "$n"; done
	[ "$sc" = drop-test ] && printf '[[acl.rule]]\naction = "accept"\nsrc = "10.10.1.0/24"\n\n'
	true
}

kernel_routes() { # $1 = scenario
	nsx $RTR ip addr add 10.10.1.1/24 dev $R0
	nsx $RTR ip addr add 10.10.2.1/24 dev $R1
	nsx $RTR ip neigh replace 10.10.2.2 lladdr $MAC_S0 dev $R1 nud permanent
	nsx $RTR ip route add 198.18.0.0/15 via 10.10.2.2
	if [ "$1" = 900k-routes-50fw ]; then
		zcat -f "$ROUTES" | awk '!/:/ && NF { print "route replace " $1 " via 10.10.2.2" }' >"$WORK/routes.batch"
		nsx $RTR ip -force -batch "$WORK/routes.batch" 2>/dev/null || true
	fi
	nsx $RTR sysctl -qw net.ipv4.ip_forward=1
}

one_run() { # $1 = scenario, $2 = case; prints "scenario case mpps ns_per_pkt gen_mpps"
	local sc=$1 c=$2 out hz start tpid="" xpid="" busy=""
	# user and xsk busy-poll r0's NAPI themselves: it stays unthreaded.
	case $c in user | xsk) busy=1 ;; esac
	hz=$(getconf CLK_TCK)
	out=$(mktemp -d "$WORK/run.XXXX")
	if [ "$sc" = gre-multi-flow ] && { [ "$c" = xdp-fwd ] || [ "$c" = linux ] || [ "$c" = xsk ]; }; then
		echo "$sc $c n/a n/a n/a"
		return
	fi
	start=3
	[ "$sc" = 900k-routes-50fw ] && start=25
	# The kernel's routes before the sink's clock starts: loading 900k
	# routes with ip -batch can take longer than the sink's warm-up, and
	# the measuring window would then close before traffic flowed.
	if [ "$c" = xdp-fwd ] || [ "$c" = linux ]; then
		kernel_routes "$sc"
		start=3
	fi
	# The sink first: r1 can take redirected frames once s0 runs XDP. Its
	# window starts when this script's does (the file "go"), and it stays
	# attached a while after it (the generator sends 0.5 s longer): with
	# its own clock it ended up to ~1.5 s early in some runs, and once s0
	# lost its XDP program r1 could no longer send redirected frames (the
	# lane then punts them to userspace, xdp-fwd's redirects fail).
	nsx $SNK taskset -c 0 "$BENCH" sink --dev $S0 --warmup "$(calc "$start + $WARMUP + 0.5")" \
		--start-file "$out/go" --seconds "$MEASURE" --linger 1 >"$out/sink" 2>"$out/sink.err" &
	local sinkpid=$!; PIDS+=("$sinkpid")
	for _ in $(seq 50); do
		nsx $SNK sh -c "echo 1 > /sys/class/net/$S0/threaded" 2>/dev/null && [ -n "$(napi_pids $S0)" ] && break
		sleep 0.1
	done
	pin_napi $S0 0
	local t_start=$SECONDS
	case $c in
	lane | user)
		tern_config "$sc" "$c" "$out" >"$out/tern.toml"
		# Not through the nsx function: `&` on a function forks a subshell,
		# $! would be that shell, and a non-interactive shell's background
		# jobs ignore SIGINT, so tern never heard the stop and `wait` hung.
		ip netns exec "$RTR" taskset -c 1 "$TERN" run --config "$out/tern.toml" >"$out/tern.log" 2>&1 &
		tpid=$!; PIDS+=("$tpid")
		if [ "$c" = user ]; then
			for _ in $(seq 100); do
				nsx $GEN python3 -c "
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b'$G0')
for _ in range(8):
    s.sendto(b'tern napi probe', ('255.255.255.255', 9))" 2>/dev/null || true
				grep -q "busy polling through\|busy polling on the XSK" "$out/tern.log" && break
				sleep 0.1
			done
			grep -q "busy polling through\|busy polling on the XSK" "$out/tern.log" ||
				echo "--- $sc $c: busy polling did not engage" >&2
		fi
		;;
	xsk)
		nsx $RTR ip addr add 10.10.1.1/24 dev $R0
		nsx $RTR ip addr add 10.10.2.1/24 dev $R1
		ip netns exec "$RTR" taskset -c 1 "$BENCH" xsk-fwd --in $R0 --out $R1 --dst-mac $MAC_S0 --src-mac $MAC_R1 \
			--local 10.10.1.1 --local 10.10.2.1 --busy-poll on --cpu 1 --warmup 1 \
			--seconds "$(calc "$start + $WARMUP + $MEASURE + 1.3")" >"$out/fwd" 2>"$out/fwd.err" &
		tpid=$!; PIDS+=("$tpid")
		# Its own window (printed with the busy-poll state it ended in)
		# closes after the rig's and before the rig stops it.
		sleep 1
		nsx $GEN bash -c 'for i in 1 2 3 4 5; do echo probe > /dev/udp/10.10.1.1/9; done' 2>/dev/null || true
		;;
	xdp-fwd)
		# Held attached by its process until the end of the run (killed
		# with the case's other processes).
		ip netns exec "$RTR" "$BENCH" xdp-fwd --dev $R0 --dev $R1 >"$out/xdpfwd" 2>&1 &
		xpid=$!; PIDS+=("$xpid")
		for _ in $(seq 100); do grep -q attached "$out/xdpfwd" && break; sleep 0.1; done
		grep -q attached "$out/xdpfwd" || { echo "--- $sc $c: $(cat "$out/xdpfwd")" >&2; }
		;;
	linux)
		nsx $RTR ethtool -K $R0 gro on >/dev/null # NAPI for the generator's frames
		;;
	esac
	# Threaded NAPI of the router's devices on CPU 1 (veth NAPI exists once
	# XDP or GRO is on; tern turns these on when it attaches).
	sleep 1
	for d in $R0 $R1; do
		[ -n "$busy" ] && [ "$d" = "$R0" ] && continue
		napi_threaded $RTR $d 2>/dev/null || true
		pin_napi $d 1
	done
	local waited=$((SECONDS - t_start))
	[ $waited -lt $start ] && sleep $((start - waited))
	for d in $R0 $R1; do
		[ -n "$busy" ] && [ "$d" = "$R0" ] && continue
		napi_threaded $RTR $d 2>/dev/null || true
		pin_napi $d 1
	done
	# shellcheck disable=SC2086 # GEN_ARGS: words for tern-bench gen
	nsx $GEN taskset -c 0 "$BENCH" gen --dev $G0 --scenario "$sc" --dst-mac $MAC_R0 --src-mac $MAC_G0 \
		--cpu 0 --seconds "$(calc "$WARMUP + $MEASURE + 1")" ${GEN_ARGS:-} >"$out/gen" 2>"$out/gen.err" &
	PIDS+=("$!")
	sleep "$(calc "$WARMUP + 0.5")"
	local napi t0 s0 t1 s1 p0 p1
	napi=$( { napi_pids $R0; napi_pids $R1; } | tr '\n' ' ')
	touch "$out/go" # the sink's window starts now too
	# shellcheck disable=SC2086
	t0=$(ticks $napi); s0=$(sirq1); p0=0
	[ -n "$tpid" ] && p0=$(ticks "$tpid")
	local at
	at=$(date +%s) # names this window's SCRATCH files
	if [ -n "${SCRATCH:-}" ] && [ "$c" = lane ]; then
		bpftool -j map dump name lane_ctr >"$SCRATCH.$sc.$at.ctr0.json" 2>&1 || true
	fi
	if [ -n "${PERF:-}" ] && [ -n "$tpid" ]; then
		perf record -F 2999 -g -p "$tpid" -o "$PERF.$c.data" -- sleep "$MEASURE" >/dev/null 2>&1
	else
		sleep "$MEASURE"
	fi
	# shellcheck disable=SC2086
	t1=$(ticks $napi); s1=$(sirq1); p1=0
	[ -n "$tpid" ] && p1=$(ticks "$tpid")
	if [ -n "${SCRATCH:-}" ] && [ "$c" = lane ]; then
		# At the end of the window: the lane's per-CPU scratch (its caches'
		# and memos' moving miss rates, of 65536), counters, interface
		# table, and tern's counters and log.
		bpftool -j map dump name lane_scratch >"$SCRATCH.$sc.$at.json" 2>&1 || true
		"$TERN" stats --socket "$out/tern.sock" >"$SCRATCH.$sc.$at.stats" 2>&1 || true
		bpftool -j map dump name lane_ctr >"$SCRATCH.$sc.$at.ctr.json" 2>&1 || true
		bpftool -j map dump name lane_ifs >"$SCRATCH.$sc.$at.ifs.json" 2>&1 || true
		cp "$out/tern.log" "$SCRATCH.$sc.$at.log" 2>/dev/null || true
	fi
	wait "$sinkpid" || { cat "$out/sink.err" >&2; }
	sleep 1.5
	if [ -n "$tpid" ]; then
		kill -TERM "$tpid" 2>/dev/null || true
		wait "$tpid" 2>/dev/null || true
	fi
	if [ -n "$xpid" ]; then
		kill -TERM "$xpid" 2>/dev/null || true
		wait "$xpid" 2>/dev/null || true
	fi
	wait 2>/dev/null || true
	PIDS=()
	if [ "$c" = xsk ] && ! grep -q "busy_poll=Helper\|busy_poll=Socket" "$out/fwd" 2>/dev/null; then
		echo "--- $sc $c: busy polling not engaged (or the forwarder stopped early): $(cat "$out/fwd" 2>/dev/null)" >&2
	fi
	local pkts
	pkts=$(field pkts "$out/sink")
	if [ "${pkts:-0}" = 0 ] || [ -n "${VERBOSE:-}" ]; then
		echo "--- $sc $c: sink counted ${pkts:-0}; logs:" >&2
		tail -20 "$out/tern.log" >&2 2>/dev/null || true
		cat "$out/gen.err" "$out/sink.err" >&2 2>/dev/null || true
	fi
	local ns
	ns=$(echo "$t0 $t1 $s0 $s1 $p0 $p1 ${pkts:-0} $hz" |
		awk '{ ticks = ($2 - $1) + ($4 - $3) + ($6 - $5); printf "%.0f", ticks * 1e9 / $8 / ($7 > 0 ? $7 : 1) }')
	echo "$sc $c $(field mpps "$out/sink") $ns $(field mpps "$out/gen") load=$(cut -d' ' -f1 /proc/loadavg)"
}

echo "# scenario case sink_mpps router_ns_per_pkt gen_offered_mpps"
for r in $(seq "$RUNS"); do
	for sc in "${SCENARIOS[@]}"; do
		for c in "${CASES[@]}"; do
			setup
			one_run "$sc" "$c"
			for n in $GEN $RTR $SNK; do ip netns del "$n"; done
		done
	done
done | while IFS= read -r line; do
	# Each run's line on stderr too, through the shell's own descriptor:
	# `tee -a /dev/stderr` reopened the file, and with stdout and stderr
	# redirected to one file its writes and the medians overwrote each other.
	printf '%s\n' "$line" >&2
	printf '%s\n' "$line"
done | awk '
	!/^#/ && $3 != "n/a" { k = $1 " " $2; n[k]++; m[k, n[k]] = $3; ns[k, n[k]] = $4 }
	!/^#/ && $3 == "n/a" { na[$1 " " $2] = 1 }
	function med(a, k, cnt,   i, j, t, v) {
		for (i = 1; i <= cnt; i++) v[i] = a[k, i]
		for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		return v[int((cnt + 1) / 2)]
	}
	END { print "# medians: scenario case sink_mpps router_ns_per_pkt runs"
	      for (k in n) print k, med(m, k, n[k]), med(ns, k, n[k]), n[k]
	      for (k in na) print k, "n/a n/a 0" }' 2>&1
