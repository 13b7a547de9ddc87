#!/usr/bin/env bash
# The 3-namespace veth rig: gen -> router -> sink, and the measurements of
# the AF_XDP forwarder (`tern-bench xsk-fwd`, crates/bench/src/rig/xsk_fwd.rs)
# against Linux kernel forwarding on it.
#
#   gen ns  [g0] ---- [r0]  router ns  [r1] ---- [s0]  sink ns
#   10.77.1.2       10.77.1.1       10.77.2.1       10.77.2.2
#
# CPU 0: the generator (`tern-bench gen`: BPF_PROG_TEST_RUN live frames,
# 64-byte UDP, one flow) and the sink (`tern-bench sink`: an XDP program on
# s0 that counts and drops; its NAPI thread pinned to CPU 0). CPU 1: the router. Packets are counted at the sink, not with
# veth counters (drops hide in softnet_stat).
#
# Cases:
#   linux         ip_forward=1; r0's NAPI thread pinned to CPU 1
#   xsk-busy      xsk-fwd on CPU 1, preferred busy polling through the
#                 helper socket's borrowed NAPI id (threaded NAPI off,
#                 napi_defer_hard_irqs=1000, gro_flush_timeout=5 ms)
#   xsk-nobusy    xsk-fwd on CPU 1, no busy polling, r0's NAPI thread on
#                 CPU 1 too (one core for the router)
#   xsk-nobusy2   same, r0's NAPI thread on CPU 0 (the generator's core)
#
# Router CPU ns/packet = CPU time of the router's threads in the window
# (forwarder thread from getrusage, NAPI kthreads from /proc/PID/stat) plus
# irq/softirq time on CPU 1, per packet counted at the sink.
#
# Usage: sudo crates/bench/scripts/xsk_rig.sh [RUNS] [CASES...]
#   env: WARMUP (s, default 2), MEASURE (s, default 5), SCHED (none, the
#   default; nice: the generator, the forwarder and the NAPI threads at
#   nice -20; fifo: SCHED_FIFO 10, NAPI threads 20). On a machine shared
#   with other work, none lets the router threads be descheduled long
#   enough for a 256-entry veth ring to overflow (0.4 ms at 0.7 Mpps);
#   nice -20 on both cores starves rcu_preempt and ksoftirqd, and the
#   live-frames generator then stalls in D state; fifo starves ksoftirqd,
#   which may then hold the NAPI a busy poller wants. Report which was used.
#   BENCH (tern-bench; default: cargo build --release -p tern-bench in
#   CARGO_TARGET_DIR)
# Needs: root, iproute2, ethtool, Linux 5.18+ (live frames).
set -euo pipefail

RUNS=${1:-3}
shift || true
CASES=("$@")
[ ${#CASES[@]} -eq 0 ] && CASES=(linux xsk-busy xsk-nobusy xsk-nobusy2)
WARMUP=${WARMUP:-2}
SCHED=${SCHED:-none}
case $SCHED in
none) PRIO=() ;;
nice) PRIO=(nice -n -20) ;;
fifo) PRIO=(chrt -f 10) ;;
*) echo "SCHED=$SCHED: nice or fifo" >&2; exit 2 ;;
esac
MEASURE=${MEASURE:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
if [ -z "${BENCH:-}" ]; then
	(cd "$ROOT" && cargo build -q --release -p tern-bench)
	BENCH="${CARGO_TARGET_DIR:-$ROOT/target}/release/tern-bench"
fi

ID=$(($$ % 10000))
GEN=txdprig$ID-gen RTR=txdprig$ID-rtr SNK=txdprig$ID-snk
# Interface names unique on the machine: NAPI kthreads are named after them.
G0=q${ID}g0 R0=q${ID}r0 R1=q${ID}r1 S0=q${ID}s0
MAC_G0=02:00:00:00:00:11 MAC_R0=02:00:00:00:00:10 MAC_R1=02:00:00:00:00:20 MAC_S0=02:00:00:00:00:21
PIDS=()

cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for n in $GEN $RTR $SNK; do ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
calc() { awk "BEGIN { print $1 }"; }

setup() {
	for n in $GEN $RTR $SNK; do ip netns add "$n"; ip -n "$n" link set lo up; done
	ip -n $RTR link add $R0 address $MAC_R0 type veth peer name $G0 address $MAC_G0 netns $GEN
	ip -n $RTR link add $R1 address $MAC_R1 type veth peer name $S0 address $MAC_S0 netns $SNK
	ip -n $GEN addr add 10.77.1.2/24 dev $G0
	ip -n $RTR addr add 10.77.1.1/24 dev $R0
	ip -n $RTR addr add 10.77.2.1/24 dev $R1
	ip -n $SNK addr add 10.77.2.2/24 dev $S0
	ip -n $GEN link set $G0 up; ip -n $RTR link set $R0 up; ip -n $RTR link set $R1 up; ip -n $SNK link set $S0 up
	ip -n $GEN route add 10.77.2.0/24 via 10.77.1.1
	ip -n $SNK route add 10.77.1.0/24 via 10.77.2.1
	ip -n $RTR neigh replace 10.77.2.2 lladdr $MAC_S0 dev $R1
	ip -n $SNK neigh replace 10.77.2.1 lladdr $MAC_R1 dev $S0
	# UDP from normal sockets crosses AF_XDP with bad checksums otherwise.
	nsx $GEN ethtool -K $G0 tx off >/dev/null
	# Otherwise the sink's receive work lands on the router core.
	nsx $RTR ethtool -K $R1 tso off >/dev/null
}

# Sets r0's NAPI mode for a case: threaded on a CPU, or not threaded.
napi_threaded() { nsx $RTR sh -c "echo $2 > /sys/class/net/$1/threaded"; }
napi_pids() { ps -eo pid=,comm= | awk -v p="napi/$1-" 'index($2, p) == 1 {print $1}'; }
pin_napi() {
	for p in $(napi_pids "$1"); do
		taskset -pc "$2" "$p" >/dev/null
		case $SCHED in
		fifo) chrt -f -p 20 "$p" ;;
		nice) renice -n -20 -p "$p" >/dev/null ;;
		esac
	done
}
ticks() { # total utime+stime clock ticks of the given pids
	local t=0
	for p in "$@"; do
		v=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) || continue
		t=$((t + ${v:-0}))
	done
	echo $t
}
# CPU 1: busy ticks, total ticks, irq+softirq ticks (softirq work done on
# the router core counts as router work; IRQ time accounting keeps it out
# of the threads' own times).
cpu1_busy() { awk '/^cpu1 / {print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8+$9, $7+$8}' /proc/stat; }
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" "$2" | head -1; }

one_run() { # $1 = case; prints "case mpps ns_per_pkt cpu1_busy_pct"
	local c=$1 out fwdpid="" hz
	hz=$(getconf CLK_TCK)
	out=$(mktemp -d)
	# The sink's NAPI exists once its XDP program is attached (below);
	# threaded so it can be pinned to CPU 0.
	case $c in
	linux)
		nsx $RTR sysctl -qw net.ipv4.ip_forward=1
		nsx $RTR ethtool -K $R0 gro on >/dev/null # NAPI for the generator's frames
		napi_threaded $R0 1; pin_napi $R0 1
		;;
	xsk-busy)
		nsx $RTR taskset -c 1 "${PRIO[@]}" "$BENCH" xsk-fwd --in $R0 --out $R1 --dst-mac $MAC_S0 --src-mac $MAC_R1 \
			--local 10.77.1.1 --local 10.77.2.1 --busy-poll on --cpu 1 \
			--warmup "$(calc "$WARMUP + 1.5")" --seconds "$MEASURE" >"$out/fwd" 2>"$out/fwd.err" &
		fwdpid=$!; PIDS+=("$fwdpid")
		;;
	xsk-nobusy | xsk-nobusy2)
		nsx $RTR taskset -c 1 "${PRIO[@]}" "$BENCH" xsk-fwd --in $R0 --out $R1 --dst-mac $MAC_S0 --src-mac $MAC_R1 \
			--local 10.77.1.1 --local 10.77.2.1 --busy-poll off --cpu 1 \
			--warmup "$(calc "$WARMUP + 1.5")" --seconds "$MEASURE" >"$out/fwd" 2>"$out/fwd.err" &
		fwdpid=$!; PIDS+=("$fwdpid")
		;;
	esac
	sleep 1
	if [ "$c" = xsk-busy ]; then
		# Probe packets to the discard port teach the helper socket r0's NAPI id.
		nsx $GEN bash -c 'for i in 1 2 3 4 5; do echo probe > /dev/udp/10.77.1.1/9; done' || true
	fi
	case $c in
	xsk-nobusy) napi_threaded $R0 1; pin_napi $R0 1 ;;
	xsk-nobusy2) napi_threaded $R0 1; pin_napi $R0 0 ;;
	esac
	sleep 0.5
	nsx $SNK taskset -c 0 "$BENCH" sink --dev $S0 --warmup "$WARMUP" --seconds "$MEASURE" >"$out/sink" 2>"$out/sink.err" &
	local sinkpid=$!; PIDS+=("$sinkpid")
	# The sink's NAPI appears once its XDP program is attached.
	for _ in $(seq 50); do
		nsx $SNK sh -c "echo 1 > /sys/class/net/$S0/threaded" 2>/dev/null && [ -n "$(napi_pids $S0)" ] && break
		sleep 0.1
	done
	pin_napi $S0 0
	nsx $GEN "${PRIO[@]}" "$BENCH" gen --dev $G0 --scenario single-flow-50fw --dst-mac $MAC_R0 --src-mac $MAC_G0 \
		--src 10.77.1.2 --dst 10.77.2.2 --cpu 0 --seconds "$(calc "$WARMUP + $MEASURE + 1")" >"$out/gen" 2>"$out/gen.err" &
	PIDS+=("$!")
	sleep "$(calc "$WARMUP - 0.3")"
	local napi t0 c0 t1 c1
	napi=$(napi_pids $R0 | tr '\n' ' ')
	# shellcheck disable=SC2086
	t0=$(ticks $napi); c0=$(cpu1_busy)
	sleep "$MEASURE"
	# shellcheck disable=SC2086
	t1=$(ticks $napi); c1=$(cpu1_busy)
	wait "$sinkpid" || { cat "$out/sink.err" >&2; return 1; }
	if [ -n "$fwdpid" ]; then wait "$fwdpid" || { cat "$out/fwd.err" >&2; return 1; }; fi
	wait
	PIDS=()
	local pkts fwd_ns napi_ns busy
	pkts=$(field pkts "$out/sink")
	if [ "${pkts:-0}" = 0 ] || [ -n "${VERBOSE:-}" ]; then
		echo "--- $c: nothing counted at the sink; forwarder and generator said:" >&2
		cat "$out"/fwd.err "$out"/gen.err "$out"/sink.err >&2 2>/dev/null || true
		nsx $GEN ethtool -S $G0 | grep -v ': 0$' >&2 || true
		nsx $RTR ethtool -S $R0 | grep -v ': 0$' >&2 || true
	fi
	fwd_ns=$(field thread_cpu_ns "$out/fwd" 2>/dev/null || true)
	napi_ns=$(( (t1 - t0) * 1000000000 / hz ))
	busy=$(echo "$c0 $c1" | awk '{printf "%.0f", 100 * ($4 - $1) / ($5 - $2)}')
	local sirq_ns
	sirq_ns=$(echo "$c0 $c1" | awk -v hz="$hz" '{printf "%.0f", ($6 - $3) * 1e9 / hz}')
	echo "$c $(field mpps "$out/sink") $(echo "${fwd_ns:-0} $napi_ns $sirq_ns $pkts" | awk '{printf "%.0f", ($1 + $2 + $3) / ($4 > 0 ? $4 : 1)}') $busy $(field mpps "$out/gen") $(grep -o 'busy_poll=[A-Za-z]*' "$out/fwd" 2>/dev/null || echo -) load=$(cut -d' ' -f1 /proc/loadavg) sched=$SCHED"
	rm -rf "$out"
}

echo "# case sink_mpps router_ns_per_pkt cpu1_busy_pct gen_offered_mpps busy_poll"
for r in $(seq "$RUNS"); do
	for c in "${CASES[@]}"; do
		# A fresh rig per run: NAPI state (threaded, defer) must not carry over.
		setup
		one_run "$c"
		for n in $GEN $RTR $SNK; do ip netns del "$n"; done
	done
done | tee /dev/stderr | awk '
	!/^#/ { n[$1]++; m[$1, n[$1]] = $2; ns[$1, n[$1]] = $3 }
	function med(a, k, cnt,   i, j, t, v) {
		for (i = 1; i <= cnt; i++) v[i] = a[k, i]
		for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
		return v[int((cnt + 1) / 2)]
	}
	END { print "# medians: case sink_mpps router_ns_per_pkt runs"
	      for (c in n) print c, med(m, c, n[c]), med(ns, c, n[c]), n[c] }' 2>&1
