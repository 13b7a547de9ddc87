#!/usr/bin/env bash
# ESP forwarding through a pair of IPsec gateways: tern against strongSwan
# with kernel-libipsec (issue 39's figure), the same traffic in the same run.
#
#   gen ns [g0] -- [a0] GW-A [a1] ==== [b1] GW-B [b0] -- [s0] sink ns
#   10.10.1.2    10.10.1.1  192.0.2.1  192.0.2.2  10.10.2.1    10.10.2.2
#
# GW-A encrypts what the generator sends to 198.18.0.0/15 into a tunnel to
# GW-B, which decrypts it and forwards it to the sink. Cases (the gateway
# pair):
#   tern-udp    two `tern run`, AF_XDP lane (LANE: "afxdp"), a route-based
#               ipsec tunnel keyed by static [[ipsec_sa]], ESP in UDP 4500
#               (udp_encap = true: what libipsec always does, the fair case)
#   tern-esp    the same with plain ESP (protocol 50)
#   swan        two charons (IKEv2 PSK, X25519), kernel-libipsec (userspace
#               ESP over a TUN, always in UDP 4500), Linux forwarding
# each with AES-128-GCM ("gcm": tern aes-128-gcm; strongSwan aes128gcm16)
# and AES-128-CBC + HMAC-SHA1-96 ("cbc": aes-128-cbc/hmac-sha1-96;
# aes128-sha1), at 64-byte frames and at the seed's 1418-byte payload
# (1436-byte frames: the inner IP packet is 1418 bytes).
#
# Traffic: `tern-bench gen` (scenario single-flow-50fw's one UDP flow, no
# firewall on either gateway), flat out (RATE=PPS paces it instead); where
# the kernel refuses the XDP generator (BPF_PROG_TEST_RUN live frames need
# CAP_SYS_RESOURCE) it sends the same frames from an AF_XDP socket (said on
# its line). The sink is `tern-bench sink` (the tester's XDP receiver on
# s0): it counts the generator's frames that arrive decrypted, so the
# figure is what the pair delivered. Medians of RUNS; Gbps counts the inner
# IP packets' bytes (frame - 14).
#
# CPUs: the tester (generator and sink) on CPU 0, both gateways on CPU 1
# (CPU_GEN, CPU_SINK, CPU_A, CPU_B). The pair under test has one CPU, the
# same for tern and strongSwan, and the generator one of its own, so that it
# offers more than either pair forwards and the figure is the pair's
# capacity; a gateway that shares the generator's CPU lowers what is
# offered to it by what it uses (the layout before 2026-12-07: generator
# and GW-B on CPU 0, GW-A on CPU 1, which offered strongSwan half of what
# it offered tern). The processes run at nice NICE (-15) in their sessions:
# the scheduler weighs sessions (autogroups), so that is what keeps other
# work on the machine (builds) from taking their CPU. At nice 0 and a
# load of ~20, a tern worker waited up to 33 ms (perf sched) and the
# AF_XDP rings (1024 frames) overflowed: half the frames were lost there
# (the veths' rx_queue_0_drops), and strongSwan lost two thirds.
# The layout matters to strongSwan's cost: with each gateway on a CPU of
# its own (CPU_SINK=1 CPU_B=0) its two charons took 25 k packets per
# CPU-second at 64 B, on one CPU together 18.7 k; tern about 200-240 k
# either way (docs/perf/results/ipsec/swan3.txt..swan6.txt), so tern's
# ratio is ~8x in the one layout and 11-12.7x in the other.
#
# CPU-normalised figure: each run also reports the packets delivered per
# CPU-second of the two gateways: user + system time (/proc/PID/stat
# utime + stime, every thread) of every process in each gateway's session
# (the two `tern run`, or the two charons with their libipsec threads),
# sampled when the sink starts counting and MEASURE seconds later. Softirq
# work is charged to whatever task a tick interrupts
# (CONFIG_IRQ_TIME_ACCOUNTING off here): a veth's receive processing mostly
# lands on the sender, for both cases alike: a0's (into GW-A) on the
# generator, b1's (into GW-B) on GW-A, s0's (the sink) on GW-B. The last
# lines give tern's ratio to strongSwan in both figures.
#
# KEEP=1 keeps each run's directory with, for tern, `tern stats` and
# `tern worker` of both gateways, and for every case each device's
# counters (`ip -s link`, `ethtool -S`): every frame the generator sent is
# in one of them (delivered, or dropped and where).
#
# Usage: sudo crates/bench/scripts/ipsec_vs_strongswan.sh [RUNS]
#   env: CASES ("tern-udp tern-esp swan"), ALGS ("gcm cbc"), SIZES
#        ("64 1436"), WARMUP (s, 2), MEASURE (s, 5), RATE (pps; flat out),
#        NICE (-15), CPU_GEN/CPU_SINK (0), CPU_A/CPU_B (1), LANE (tern's
#        lane: afxdp), TERN, BENCH (binaries; default: cargo build
#        --release), KEEP=1 keeps the work directory.
# Needs: root, iproute2, strongSwan (charon, swanctl, kernel-libipsec; see
# scripts/setup.sh), /dev/net/tun. No python.
set -euo pipefail
# A session of its own (for prioritise below: the generator and the sink
# run in it).
if [ -z "${IPSEC_VS_SWAN_SESSION:-}" ]; then
	IPSEC_VS_SWAN_SESSION=1 exec setsid --wait "$0" "$@"
fi

RUNS=${1:-3}
read -r -a CASES <<<"${CASES:-tern-udp tern-esp swan}"
read -r -a ALGS <<<"${ALGS:-gcm cbc}"
read -r -a SIZES <<<"${SIZES:-64 1436}"
WARMUP=${WARMUP:-2}
NICE=${NICE:--15}
LANE=${LANE:-afxdp}
CPU_GEN=${CPU_GEN:-0} CPU_SINK=${CPU_SINK:-0} CPU_A=${CPU_A:-1} CPU_B=${CPU_B:-1}
MEASURE=${MEASURE:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${TERN:-}" ]; then
	(cd "$ROOT" && cargo build -q --release -p tern)
	TERN="$TGT/release/tern"
fi
if [ -z "${BENCH:-}" ]; then
	(cd "$ROOT" && cargo build -q --release -p tern-bench)
	BENCH="$TGT/release/tern-bench"
fi
CHARON=/usr/lib/ipsec/charon
for b in "$CHARON" /usr/sbin/swanctl; do
	[ -x "$b" ] || { echo "ipsec_vs_strongswan: $b missing (scripts/setup.sh installs strongSwan)" >&2; exit 2; }
done
WORK=$(mktemp -d /tmp/ipsec_vs_swan.XXXXXX)

ID=$(($$ % 10000))
GEN=tswanrig$ID-gen GWA=tswanrig$ID-a GWB=tswanrig$ID-b SNK=tswanrig$ID-snk
G0=w${ID}g0 A0=w${ID}a0 A1=w${ID}a1 B1=w${ID}b1 B0=w${ID}b0 S0=w${ID}s0
MAC_G0=02:00:00:00:01:01 MAC_A0=02:00:00:00:01:02 MAC_A1=02:00:00:00:01:03
MAC_B1=02:00:00:00:01:04 MAC_B0=02:00:00:00:01:05 MAC_S0=02:00:00:00:01:06
PIDS=()

stop_pids() {
	local p
	for p in "${PIDS[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	PIDS=()
}
cleanup() {
	stop_pids
	for n in $GEN $GWA $GWB $SNK; do ip netns del "$n" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
# The scheduler weighs sessions (autogroups), not processes: a nice value
# counts only inside its session. Each gateway is a session of its own
# (setsid), the generator and the sink run in this script's: all get the
# same weight, NICE, so that other work on the machine takes as little of
# their CPUs as it can, for tern and strongSwan alike.
# A process started with setsid has its session (and autogroup) only once
# setsid(2) ran in it: wait for that, or the nice value lands on ours.
prioritise() {
	local _
	for _ in $(seq 400); do
		[ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f4)" = "$1" ] && break
		sleep 0.005
	done
	echo "$NICE" >"/proc/$1/autogroup" || echo "ipsec_vs_strongswan: cannot renice the session of $1" >&2
}
prioritise $$
calc() { awk "BEGIN { print $1 }"; }
HZ=$(getconf CLK_TCK)
# CPU ticks (utime + stime) of every process in session $1 (a gateway
# started with setsid): /proc/PID/stat after the ")" that ends comm has
# state, ppid, pgrp, session ... utime (12th), stime (13th).
session_ticks() {
	# Processes come and go while cat reads: its failures are not ours
	# (pipefail would end the script).
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v s="$1" '{ sub(/^.*\) /, ""); if ($4 == s) t += $12 + $13 } END { print t + 0 }'
}
field() { sed -n "s/.*\b$1=\([0-9.a-z]*\).*/\1/p" "$2" | head -1; }

setup() {
	for n in $GEN $GWA $GWB $SNK; do ip netns add "$n"; ip -n "$n" link set lo up; done
	ip -n $GEN link add $G0 address $MAC_G0 type veth peer name $A0 address $MAC_A0 netns $GWA
	ip -n $GWA link add $A1 address $MAC_A1 type veth peer name $B1 address $MAC_B1 netns $GWB
	ip -n $GWB link add $B0 address $MAC_B0 type veth peer name $S0 address $MAC_S0 netns $SNK
	ip -n $GEN link set $G0 up
	ip -n $GWA link set $A0 up; ip -n $GWA link set $A1 up
	ip -n $GWB link set $B1 up; ip -n $GWB link set $B0 up
	ip -n $SNK link set $S0 up
	ip -n $GEN addr add 10.10.1.2/24 dev $G0
	ip -n $SNK addr add 10.10.2.2/24 dev $S0
	nsx $GEN ethtool -K $G0 tx off >/dev/null
	for n in $GWA $GWB; do nsx "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
}

# Kernel addresses on the gateways (strongSwan's case); flushed after.
kernel_addrs() {
	ip -n $GWA addr add 10.10.1.1/24 dev $A0
	ip -n $GWA addr add 192.0.2.1/24 dev $A1
	ip -n $GWB addr add 192.0.2.2/24 dev $B1
	ip -n $GWB addr add 10.10.2.1/24 dev $B0
	ip -n $GWB neigh replace 10.10.2.2 lladdr $MAC_S0 dev $B0 nud permanent
	ip -n $GWB route add 198.18.0.0/15 via 10.10.2.2
	# charon on B wants an address of its own inside its local selector
	# (198.18.0.0/15) for the route it installs, else TS_UNACCEPTABLE.
	ip -n $GWB addr add 198.18.255.254/32 dev lo
	ip -n $GWA neigh replace 192.0.2.2 lladdr $MAC_B1 dev $A1 nud permanent
	ip -n $GWB neigh replace 192.0.2.1 lladdr $MAC_A1 dev $B1 nud permanent
	for n in $GWA $GWB; do nsx "$n" sysctl -qw net.ipv4.ip_forward=1; done
}
kernel_flush() {
	for d in $A0 $A1; do ip -n $GWA addr flush dev $d; done
	for d in $B0 $B1; do ip -n $GWB addr flush dev $d; done
	ip -n $GWB addr del 198.18.255.254/32 dev lo 2>/dev/null || true
	for n in $GWA $GWB; do nsx "$n" sysctl -qw net.ipv4.ip_forward=0; ip -n "$n" route flush table 220 2>/dev/null || true; done
}

# tern's SAs: A -> B spi 0x1001 (A's sa_out, B's sa_in), B -> A 0x2002.
KEY_GCM=0x000102030405060708090a0b0c0d0e0f10111213
KEY_CBC=0x000102030405060708090a0b0c0d0e0f
IKEY=0x202122232425262728292a2b2c2d2e2f30313233
sa() { # $1 id, $2 spi, $3 alg, $4 udp
	printf '[[ipsec_sa]]\nid = %s\nspi = %s\n' "$1" "$2"
	if [ "$3" = gcm ]; then
		printf 'crypto = "aes-128-gcm"\ninteg = "none"\nkey = "%s"\n' $KEY_GCM
	else
		printf 'crypto = "aes-128-cbc"\ninteg = "hmac-sha1-96"\nkey = "%s"\ninteg_key = "%s"\n' $KEY_CBC $IKEY
	fi
	printf 'replay_window = 1024\nudp_encap = %s\n\n' "$4"
}
tern_config() { # $1 side (a|b), $2 alg, $3 udp, $4 dir, $5 cpu
	local lan lanaddr wan wanaddr local remote out in
	if [ "$1" = a ]; then
		lan=$A0 lanaddr=10.10.1.1/24 wan=$A1 wanaddr=192.0.2.1/24 local=192.0.2.1 remote=192.0.2.2 out=1 in=2
	else
		lan=$B0 lanaddr=10.10.2.1/24 wan=$B1 wanaddr=192.0.2.2/24 local=192.0.2.2 remote=192.0.2.1 out=2 in=1
	fi
	cat <<-EOF
		[dataplane]
		workers = 1
		cpus = [$5]

		[api]
		socket = "$4/tern-$1.sock"

		[metrics]
		listen = ""

		[[interface]]
		name = "lan0"
		device = "$lan"
		lane = "$LANE"
		addresses = ["$lanaddr"]

		[[interface]]
		name = "wan0"
		device = "$wan"
		lane = "$LANE"
		addresses = ["$wanaddr"]

		[[tunnel]]
		name = "ipsec0"
		type = "ipsec"
		local = "$local"
		remote = "$remote"
		sa_out = $out
		sa_in = [$in]
		addresses = ["172.16.1.$([ "$1" = a ] && echo 1 || echo 2)/30"]

	EOF
	sa 1 0x1001 "$2" "$3"
	sa 2 0x2002 "$2" "$3"
	if [ "$1" = a ]; then
		printf '[[route]]\nprefix = "198.18.0.0/15"\ninterface = "ipsec0"\n\n'
		printf '[[neighbor_entry]]\ninterface = "wan0"\naddress = "192.0.2.2"\nmac = "%s"\n\n' $MAC_B1
	else
		printf '[[route]]\nprefix = "198.18.0.0/15"\nvia = "10.10.2.2"\n\n'
		printf '[[route]]\nprefix = "10.10.1.0/24"\ninterface = "ipsec0"\n\n'
		printf '[[neighbor_entry]]\ninterface = "lan0"\naddress = "10.10.2.2"\nmac = "%s"\n\n' $MAC_S0
		printf '[[neighbor_entry]]\ninterface = "wan0"\naddress = "192.0.2.1"\nmac = "%s"\n\n' $MAC_A1
	fi
}

swan_conf() { # $1 side, $2 dir
	local d=$2
	mkdir -p "$d" "$d"/{x509,x509ca,x509ocsp,x509aa,x509ac,x509crl,pubkey,private,rsa,ecdsa,bliss,pkcs8,pkcs12}
	cat >"$d/strongswan.conf" <<-EOF
		charon {
		  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey hmac sha1 sha2 kdf aes gcm socket-default vici kernel-libipsec kernel-netlink updown
		  install_routes = yes
		  filelog {
		    log {
		      path = $d/charon.log
		      default = 1
		      ike = 2
		      knl = 2
		      flush_line = yes
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
		    kernel-libipsec {
		      mtu = 1500
		    }
		  }
		}
		swanctl {
		  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey kdf
		}
	EOF
}
swan_swanctl() { # $1 side, $2 alg, $3 dir
	local l r lts rts esp
	if [ "$1" = a ]; then l=192.0.2.1 r=192.0.2.2 lts=10.10.1.0/24 rts=198.18.0.0/15
	else l=192.0.2.2 r=192.0.2.1 lts=198.18.0.0/15 rts=10.10.1.0/24; fi
	if [ "$2" = gcm ]; then esp=aes128gcm16; else esp=aes128-sha1; fi
	cat >"$3/swanctl.conf" <<-EOF
		connections {
		  gw {
		    local_addrs = $l
		    remote_addrs = $r
		    proposals = aes128gcm16-prfsha256-x25519
		    local {
		      auth = psk
		      id = $l
		    }
		    remote {
		      auth = psk
		      id = $r
		    }
		    children {
		      net {
		        local_ts = $lts
		        remote_ts = $rts
		        esp_proposals = $esp
		      }
		    }
		  }
		}
		secrets {
		  ike-gw {
		    id-1 = 192.0.2.1
		    id-2 = 192.0.2.2
		    secret = "ipsec-vs-strongswan"
		  }
		}
	EOF
}
start_charon() { # $1 ns, $2 dir, $3 cpu
	STRONGSWAN_CONF=$2/strongswan.conf setsid ip netns exec "$1" taskset -c "$3" unshare --mount --propagation private \
		sh -c "mount -t tmpfs tmpfs /run && exec $CHARON" >"$2/charon.out" 2>&1 &
	PIDS+=("$!")
	prioritise "$!"
	for _ in $(seq 200); do
		STRONGSWAN_CONF=$2/strongswan.conf swanctl --stats --uri "unix://$2/charon.vici" >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "charon in $1 did not come up: $(cat "$2/charon.out")" >&2
	return 1
}
swanctl_in() { # $1 dir, args...
	local d=$1; shift
	STRONGSWAN_CONF=$d/strongswan.conf swanctl "$@" --uri "unix://$d/charon.vici"
}

wait_tern() { # $1 socket, $2 log
	for _ in $(seq 600); do
		"$TERN" --socket "$1" status >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "tern did not come up: $(tail -20 "$2")" >&2
	return 1
}

one_run() { # $1 case, $2 alg, $3 size; prints "case alg size mpps gbps gen_mpps generator"
	local c=$1 alg=$2 size=$3 out start=3
	out=$(mktemp -d "$WORK/run.XXXX")
	case $c in
	tern-udp | tern-esp)
		local udp=true
		[ "$c" = tern-esp ] && udp=false
		tern_config a "$alg" $udp "$out" "$CPU_A" >"$out/a.toml"
		tern_config b "$alg" $udp "$out" "$CPU_B" >"$out/b.toml"
		setsid ip netns exec $GWA taskset -c "$CPU_A" "$TERN" run --config "$out/a.toml" >"$out/a.log" 2>&1 &
		PIDS+=("$!")
		prioritise "$!"
		setsid ip netns exec $GWB taskset -c "$CPU_B" "$TERN" run --config "$out/b.toml" >"$out/b.log" 2>&1 &
		PIDS+=("$!")
		prioritise "$!"
		wait_tern "$out/tern-a.sock" "$out/a.log"
		wait_tern "$out/tern-b.sock" "$out/b.log"
		;;
	swan)
		kernel_addrs
		swan_conf a "$out/a"; swan_conf b "$out/b"
		swan_swanctl a "$alg" "$out/a"; swan_swanctl b "$alg" "$out/b"
		start_charon $GWA "$out/a" "$CPU_A"
		start_charon $GWB "$out/b" "$CPU_B"
		swanctl_in "$out/a" --load-all --file "$out/a/swanctl.conf" >/dev/null
		swanctl_in "$out/b" --load-all --file "$out/b/swanctl.conf" >/dev/null
		swanctl_in "$out/a" --initiate --child net --timeout 20 >"$out/initiate" 2>&1 || {
			echo "swan: initiate failed: $(tail -5 "$out/initiate")" >&2; return 1; }
		;;
	esac
	nsx $SNK taskset -c "$CPU_SINK" "$BENCH" sink --dev $S0 --warmup "$(calc "$start + $WARMUP + 0.5")" \
		--start-file "$out/go" --seconds "$MEASURE" --linger 1 >"$out/sink" 2>"$out/sink.err" &
	local sinkpid=$!
	sleep 0.5
	nsx $GEN taskset -c "$CPU_GEN" "$BENCH" gen --dev $G0 --scenario single-flow-50fw --size "$size" \
		--dst-mac $MAC_A0 --src-mac $MAC_G0 --src 10.10.1.2 --dst 198.18.0.1 \
		--seconds "$(calc "$WARMUP + $MEASURE + 1")" ${RATE:+--rate "$RATE"} >"$out/gen" 2>"$out/gen.err" &
	local genpid=$!
	sleep "$WARMUP"
	# The gateways' CPU over the sink's window (PIDS[0], PIDS[1]: the
	# session leaders of A and B).
	local a0 b0 a1 b1 t0 t1
	a0=$(session_ticks "${PIDS[0]}"); b0=$(session_ticks "${PIDS[1]}"); t0=$(date +%s.%N)
	touch "$out/go"
	sleep "$MEASURE"
	a1=$(session_ticks "${PIDS[0]}"); b1=$(session_ticks "${PIDS[1]}"); t1=$(date +%s.%N)
	wait $sinkpid || true
	wait $genpid || true
	local pk by secs gm gk cpu
	pk=$(field pkts "$out/sink"); by=$(field bytes "$out/sink"); secs=$(field seconds "$out/sink")
	gm=$(field mpps "$out/gen"); gk=$(field generator "$out/gen")
	# CPU-seconds of both gateways, scaled to the sink's window.
	cpu=$(calc "($a1 - $a0 + $b1 - $b0) / $HZ * ${secs:-1} / ($t1 - $t0)")
	if [ -z "$pk" ] || [ -z "$secs" ]; then
		echo "$c $alg $size error error ${gm:-?} ${gk:-?} ? ?"
		echo "  sink: $(cat "$out/sink" "$out/sink.err" | tail -3)" >&2
	else
		echo "$c $alg $size $(calc "$pk / $secs / 1e6") $(calc "$pk * ($size - 18) * 8 / $secs / 1e9") ${gm:-?} ${gk:-?}" \
			"$(calc "($a1 - $a0) / $HZ / ($t1 - $t0)")/$(calc "($b1 - $b0) / $HZ / ($t1 - $t0)")" \
			"$(calc "($cpu > 0) ? $pk / $cpu / 1e3 : 0")"
	fi
	if [ -n "${KEEP:-}" ]; then
		# Where every frame went: the devices' counters in each namespace
		# and, for tern, its own (each frame a port received ends in one).
		for n in $GEN $GWA $GWB $SNK; do
			echo "== $n"; ip -n "$n" -s link show
			for d in $(ip -n "$n" -o link show type veth | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }'); do
				echo "-- ethtool -S $d"; nsx "$n" ethtool -S "$d" 2>/dev/null | grep -v ': 0$' || true
			done
		done >"$out/devices" 2>&1
		case $c in tern-*)
			for s in a b; do
				"$TERN" --socket "$out/tern-$s.sock" stats >"$out/stats-$s" 2>&1 || true
				"$TERN" --socket "$out/tern-$s.sock" worker >"$out/workers-$s" 2>&1 || true
			done ;;
		esac
		cp -r "$out" "$WORK/keep-$c-$alg-$size-$RANDOM"
	fi
	stop_pids
	[ "$c" = swan ] && kernel_flush
	true
}

setup
echo "# ipsec_vs_strongswan: RUNS=$RUNS MEASURE=${MEASURE}s cases: ${CASES[*]} rate=${RATE:-flat-out} nice=$NICE cpus: gen $CPU_GEN sink $CPU_SINK A $CPU_A B $CPU_B lane=$LANE"
echo "# case alg frame_size mpps gbps(inner IP) gen_mpps generator gw_cpu(A/B, CPUs busy) kpkts_per_gw_cpu_s"
echo "#   (mpps is the median run's; kpkts_per_gw_cpu_s the median of the runs' own)"
: >"$WORK/medians"
for size in "${SIZES[@]}"; do
	for alg in "${ALGS[@]}"; do
		for c in "${CASES[@]}"; do
			: >"$WORK/res"
			# Not in a pipeline: one_run records its daemons in PIDS, which a
			# subshell would lose (and leave them running).
			for _ in $(seq "$RUNS"); do one_run "$c" "$alg" "$size" >>"$WORK/res"; done
			sed 's/^/  run: /' "$WORK/res" >&2
			per_cpu=$(awk '{ print $9 }' "$WORK/res" | sort -g | awk -v n="$RUNS" 'NR == int((n + 1) / 2) { print }')
			sort -k4 -g "$WORK/res" | awk -v n="$RUNS" -v pc="$per_cpu" 'NR == int((n + 1) / 2) { $9 = pc; print }' |
				tee -a "$WORK/medians"
		done
	done
done
# tern against strongSwan, in Mpps and per gateway CPU-second.
echo "# ratio alg frame_size case/swan mpps_ratio per_cpu_ratio"
awk '$1 == "swan" { m[$2 " " $3] = $4; p[$2 " " $3] = $9 }
	{ r[NR] = $0 }
	END { for (i = 1; i <= NR; i++) { split(r[i], f, " "); k = f[2] " " f[3]
		if (f[1] != "swan" && (k in m) && m[k] > 0 && p[k] > 0)
			printf "ratio %s %s %s/swan %.1f %.1f\n", f[2], f[3], f[1], f[4] / m[k], f[9] / p[k] } }' "$WORK/medians"
