#!/usr/bin/env bash
# IKEv2 setup rate (issue 40's figures): `tern-bench ike` (tern's own
# initiator, one engine) sets up TUNNELS tunnels (an IKE SA and its first
# child SA each) against a responder, in one run:
#
#   cli ns [c0] 10.0.2.1 ---- 10.0.2.2 [r0] resp ns
#                      (ternrun, FWD=1: tg ns [g0] 10.0.4.2 -- t2 [tern] t1 -- 10.0.3.2 [s0] sink ns)
#
# Responders (CASES):
#   swan     strongSwan's charon (Debian 5.9.8) with kernel-libipsec (this
#            kernel has no xfrm: the child SAs go into libipsec), one
#            connection taking any identity, `unique = never`, DoS
#            protection off (no cookies), log level 0; no policies (every
#            tunnel has the same selectors) unless VERIFY=1, which needs a
#            virtual IP pool, policies and routes into libipsec's TUN
#   tern     `tern-bench ike --respond`: tern's IKE engine as a bare
#            responder on a UDP socket (with VERIFY=1 it keeps the child
#            SAs in tern-ipsec and answers the echoes through them)
#   ternrun  a whole `tern run`, standalone on AF_PACKET (one worker; every
#            thread on CPU 1): `[[ike]] remote = "any"` with a virtual IP
#            pool keying a multipoint `[[tunnel]] type = "ipsec"`; every
#            child SA is installed in the data plane with a host route to
#            its virtual IP; the echoes go to the tunnel's address
#            (10.64.0.1) and tern's workers answer them through the SAs.
#            dpd_secs = 0 as charon (its default of 30 s sends a liveness
#            check to every tunnel idle that long, mid-run).
#            Also reports tern's RSS growth per tunnel and its metrics
#            (tern_ike_sas, tern_ipsec_sas); FWD=1 measures transit
#            forwarding (tern-bench gen -> tern -> sink, AF_PACKET, FWD_SECS)
#            before any tunnel and after all are up.
# AUTH: psk, or pubkey (ECDSA P-256 certificates from a CA the script makes
# with openssl; every responder trusts it). charon leases one virtual IP
# per identity: with PSK the generator takes one identity per tunnel
# (--ids), but its certificate names one, so with pubkey every charon
# tunnel gets the same address and only one can answer: run charon with
# certificates at VERIFY=0.
# VERIFY=1: a tunnel counts only when an ICMP echo through it comes back
# (see tern-bench ike --verify); SAMPLE=N: after all are up, N tunnels
# picked at random are probed. STOP=1: end a run at issue 40's criterion
# (a failure, or retransmissions above 0.1 %). MILESTONES: tunnel counts
# at which the generator reports the rate of the segment before.
# CPUs: the generator on CPU 0, the responder on CPU 1. The responder's CPU
# time per tunnel is read from /proc (every thread of charon or tern) or
# its own report. Medians of RUNS by setups/s.
# NAPI=1: each side's veth receives in a NAPI thread of its own (GRO on,
# `threaded`), pinned to that side's CPU, as a NIC's interrupts would be.
# By default veth runs the receiver's whole path (IP, UDP, the socket's
# wake-up) inside the sender's transmit, so each side's CPU carries the
# other's receive; with NAPI=1 the responder's CPU is its threads plus its
# own receive thread (napi/r0-*), and the generator's receive is its own.
#
# Usage: sudo crates/bench/scripts/ike_setup_rate.sh [RUNS]
#   env: CASES ("swan tern ternrun"), TUNNELS (2000), WINDOW (64), AUTH (psk),
#        PROPOSAL (aes128gcm16-prfsha256-x25519), ESP (aes128gcm16),
#        VERIFY (1), SAMPLE (0), STOP (0), MILESTONES (""), FWD (0),
#        IDLE_SECS (ternrun: read the RSS again after that long idle, 0),
#        FWD_SECS (5), TIMEOUT (the generator's, s: TUNNELS/500 + 300), THREADS (charon's, 16),
#        SWAN_TABLE (charon's ikesa_table_size, 65536), SWAN_IDS (PSK
#        identities at VERIFY=0, 1000), SWAN_SAD (libipsec, or none: see
#        nullsad below), RETRANSMIT_MS (the generator's, 1000), BENCH, TERN (default: cargo
#        build --release), KEEP (keep the work directory)
# Needs: root, iproute2, openssl, strongSwan (scripts/setup.sh), curl; a C
# compiler for SWAN_SAD=none. No python.
set -euo pipefail

RUNS=${1:-3}
read -r -a CASES <<<"${CASES:-swan tern ternrun}"
TUNNELS=${TUNNELS:-2000}
WINDOW=${WINDOW:-64}
AUTH=${AUTH:-psk}
PROPOSAL=${PROPOSAL:-aes128gcm16-prfsha256-x25519}
ESP=${ESP:-aes128gcm16}
VERIFY=${VERIFY:-1}
SAMPLE=${SAMPLE:-0}
STOP=${STOP:-0}
MILESTONES=${MILESTONES:-}
FWD=${FWD:-0}
NAPI=${NAPI:-0}
IDLE_SECS=${IDLE_SECS:-0}
FWD_SECS=${FWD_SECS:-5}
THREADS=${THREADS:-16}
SWAN_TABLE=${SWAN_TABLE:-65536}
SWAN_IDS=${SWAN_IDS:-1000}
SWAN_SAD=${SWAN_SAD:-libipsec}
RETRANSMIT_MS=${RETRANSMIT_MS:-}
if [ "$SWAN_SAD" = none ] && [ "$VERIFY$SAMPLE" != 00 ]; then
	echo "SWAN_SAD=none keeps no SA: VERIFY=0 SAMPLE=0 only" >&2
	exit 2
fi
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${BENCH:-}" ] || [ -z "${TERN:-}" ]; then
	(cd "$ROOT" && cargo build -q --release -p tern-bench -p tern)
	BENCH=${BENCH:-$TGT/release/tern-bench}
	TERN=${TERN:-$TGT/release/tern}
fi
CHARON=/usr/lib/ipsec/charon
WORK=$(mktemp -d /tmp/ike_setup_rate.XXXXXX)
ID=$(($$ % 10000))
CLI=ikebench$ID-cli RSP=ikebench$ID-rsp TG=ikebench$ID-tg SINK=ikebench$ID-sink
PSK=ike-setup-rate-psk
POOL_FIRST=10.64.0.10 POOL_LAST=10.79.255.255
PIDS=()

stop_pids() {
	local p
	for p in "${PIDS[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done
	# charon deletes every SA as it stops, and kernel-libipsec finds each
	# in a list: minutes at 100K. Five seconds, then SIGKILL.
	for p in "${PIDS[@]}"; do
		for _ in $(seq 50); do
			[ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || echo Z)" = Z ] && break
			sleep 0.1
		done
		kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	PIDS=()
}
cleanup() {
	stop_pids
	for n in $CLI $RSP $TG $SINK; do ip netns del "$n" 2>/dev/null || true; done
	[ -n "${KEEP:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT
field() { sed -n "s/.*\b$1=\([0-9.a-z_]*\).*/\1/p" "$2" | head -1; }
calc() { awk "BEGIN { print $1 }"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# The responder's ticks: its process, and with NAPI=1 its receive thread.
resp_ticks() {
	local t
	t=$(ticks "$1")
	[ -z "$RX_PID" ] || t=$((t + $(ticks "$RX_PID")))
	echo "$t"
}
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

for n in $CLI $RSP; do ip netns add "$n"; ip -n "$n" link set lo up; done
ip -n $CLI link add c0 type veth peer name r0 netns $RSP
ip -n $CLI addr add 10.0.2.1/24 dev c0
ip -n $CLI link set c0 up
ip -n $RSP link set r0 up
# NAPI=1: the receive threads' pids ("napi/<dev>-<id>", kernel threads).
napi_pid() { # $1 dev name
	local f
	for f in /proc/[0-9]*/comm; do
		case "$(cat "$f" 2>/dev/null)" in "napi/$1-"*) f=${f%/comm}; echo "${f#/proc/}"; return 0 ;; esac
	done
	return 1
}
RX_PID=""
# Called once the responder is up (a device going down and up, as tern
# may do as it opens its port, gets new receive threads). veth receives
# in NAPI only with GRO on the receiver and TSO off on the sender.
napi_setup() {
	[ "$NAPI" = 1 ] || return 0
	local ns dev ns_dev
	for ns_dev in "$CLI c0" "$RSP r0"; do
		read -r ns dev <<<"$ns_dev"
		ip netns exec "$ns" ethtool -K "$dev" gro on tso off >/dev/null
		ip netns exec "$ns" sh -c "echo 1 > /sys/class/net/$dev/threaded"
	done
	taskset -pc 0 "$(napi_pid c0)" >/dev/null
	RX_PID=$(napi_pid r0)
	taskset -pc 1 "$RX_PID" >/dev/null
}
if [ "$FWD" = 1 ]; then
	for n in $TG $SINK; do ip netns add "$n"; ip -n "$n" link set lo up; done
	ip -n $TG link add g0 type veth peer name t2 netns $RSP
	ip -n $SINK link add s0 type veth peer name t1 netns $RSP
	ip -n $TG addr add 10.0.4.2/24 dev g0
	ip -n $SINK addr add 10.0.3.2/24 dev s0
	ip -n $TG link set g0 up
	ip -n $SINK link set s0 up
	ip -n $RSP link set t1 up
	ip -n $RSP link set t2 up
fi

# Certificates (AUTH=pubkey): a CA, the responders' (tern.example) and the
# generator's (bench.example), ECDSA P-256.
CERTS=$WORK/certs
if [ "$AUTH" = pubkey ]; then
	mkdir -p "$CERTS"
	(
		cd "$CERTS"
		openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key 2>/dev/null
		openssl req -x509 -new -key ca.key -subj "/CN=ike-bench CA" -days 30 -out ca.pem \
			-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
		for who in tern bench; do
			openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $who.key 2>/dev/null
			openssl req -new -key $who.key -subj "/CN=$who.example" -out $who.csr 2>/dev/null
			printf 'subjectAltName=DNS:%s.example\nbasicConstraints=CA:FALSE\n' $who >$who.ext
			openssl x509 -req -in $who.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
				-extfile $who.ext -out $who.pem 2>/dev/null
		done
	)
	GEN_AUTH=(--auth pubkey --cert "$CERTS/bench.pem" --key "$CERTS/bench.key" --ca "$CERTS/ca.pem")
	RESP_AUTH=(--auth pubkey --cert "$CERTS/tern.pem" --key "$CERTS/tern.key" --ca "$CERTS/ca.pem")
else
	GEN_AUTH=(--auth psk --psk $PSK)
	RESP_AUTH=(--auth psk --psk $PSK)
fi

# SWAN_SAD=none: kernel-libipsec keeps no SA (a shim in charon in place of
# libipsec's SA manager; the SPIs still come from it). libipsec's SAD is a
# linked list that every install walks, so with it charon's cost grows with
# the tunnels held (64-73 % of charon's CPU at 10K-16K, by perf); charon on
# a kernel with xfrm installs into the kernel's hash tables instead. Only
# with VERIFY=0: the tunnels then carry nothing.
nullsad() { # prints the path of the shim, built once
	local so=$WORK/nullsad.so
	if [ ! -e "$so" ]; then
		cat >"$WORK/nullsad.c" <<-'EOF'
			/* libipsec's SA manager without a SAD, for charon load tests (LD_PRELOAD):
			 * add/update/delete succeed and keep nothing; SPIs still come from the real
			 * manager. Layout: strongSwan 5.x src/libipsec/ipsec_sa_mgr.h (ten methods). */
			#define _GNU_SOURCE
			#include <dlfcn.h>
			#include <stdlib.h>

			typedef int status_t; /* SUCCESS = 0, FAILED = 1 */
			typedef struct mgr mgr_t;
			struct mgr {
				status_t (*get_spi)(mgr_t *, void *, void *, unsigned long, void *, void *);
				status_t (*add_sa)(void);
				status_t (*update_sa)(void);
				status_t (*query_sa)(void);
				status_t (*del_sa)(void);
				status_t (*flush_sas)(mgr_t *);
				void *(*checkout_by_spi)(mgr_t *, unsigned long, void *);
				void *(*checkout_by_reqid)(mgr_t *, unsigned long, unsigned long);
				void (*checkin)(mgr_t *, void *);
				void (*destroy)(mgr_t *);
			};
			struct wrap {
				struct mgr pub;
				mgr_t *real;
			};

			static status_t ok(void) { return 0; }
			static status_t failed(void) { return 1; }
			/* Five register arguments after this: either get_spi signature of 5.x. */
			static status_t get_spi(mgr_t *this, void *a, void *b, unsigned long c, void *d, void *e)
			{
				mgr_t *real = ((struct wrap *)this)->real;
				return real->get_spi(real, a, b, c, d, e);
			}
			static status_t flush_sas(mgr_t *this) { (void)this; return 0; }
			static void *checkout_by_spi(mgr_t *this, unsigned long spi, void *dst) { (void)this; (void)spi; (void)dst; return NULL; }
			static void *checkout_by_reqid(mgr_t *this, unsigned long r, unsigned long in) { (void)this; (void)r; (void)in; return NULL; }
			static void checkin(mgr_t *this, void *sa) { (void)this; (void)sa; }
			static void destroy(mgr_t *this)
			{
				mgr_t *real = ((struct wrap *)this)->real;
				real->destroy(real);
				free(this);
			}

			mgr_t *ipsec_sa_mgr_create(void)
			{
				/* libipsec came with kernel-libipsec (dlopen, local): not RTLD_NEXT. */
				void *lib = dlopen("libipsec.so.0", RTLD_LAZY | RTLD_NOLOAD);
				mgr_t *(*create)(void) = lib ? (mgr_t * (*)(void)) dlsym(lib, "ipsec_sa_mgr_create") : NULL;
				struct wrap *w = calloc(1, sizeof(*w));
				if (!create || !w)
					abort();
				w->real = create();
				w->pub = (struct mgr){ get_spi, ok, ok, failed, ok, flush_sas, checkout_by_spi, checkout_by_reqid, checkin, destroy };
				return &w->pub;
			}
		EOF
		cc -O2 -Wall -shared -fPIC -o "$so" "$WORK/nullsad.c" -ldl >&2
	fi
	echo "$so"
}

start_charon() { # $1 dir
	local d=$1 auth pools="" policies=no routes=no ts=""
	mkdir -p "$d" "$d"/{x509,x509ca,x509ocsp,x509aa,x509ac,x509crl,pubkey,private,rsa,ecdsa,bliss,pkcs8,pkcs12}
	if [ "$AUTH" = pubkey ]; then
		cp "$CERTS/tern.pem" "$d/x509/"
		cp "$CERTS/tern.key" "$d/private/"
		cp "$CERTS/ca.pem" "$d/x509ca/"
		auth="auth = pubkey
		      certs = tern.pem
		      id = tern.example"
	else
		auth="auth = psk
		      id = tern.example"
	fi
	if [ "$VERIFY" = 1 ] || [ "$SAMPLE" != 0 ]; then
		pools="pools = vip"
		policies=yes
		routes=yes
		ts="local_ts = 10.0.2.2/32"
	fi
	cat >"$d/strongswan.conf" <<-EOF
		charon {
		  load = random nonce openssl pem pkcs1 pkcs8 x509 pubkey hmac sha1 sha2 kdf aes gcm socket-default vici kernel-libipsec kernel-netlink attr
		  threads = $THREADS
		  # A load test's settings: no cookies, no per-IP block (every
		  # tunnel comes from one address; dos_protection = no turns off
		  # cookie_threshold and block_threshold), no half-open or job-load
		  # limit, and an IKE SA hash table of SWAN_TABLE buckets (the
		  # default is one list): 1.5 SAs a bucket at 100K, 15 at 1M, as
		  # strongSwan's "Tuning IKE SA Lookup" advises (5 to 20).
		  dos_protection = no
		  init_limit_half_open = 0
		  init_limit_job_load = 0
		  ikesa_table_size = $SWAN_TABLE
		  ikesa_table_segments = 16
		  install_routes = $routes
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
		    $pools
		    local {
		      $auth
		    }
		    remote {
		      auth = ${AUTH}
		    }
		    children {
		      net {
		        esp_proposals = $ESP
		        policies = $policies
		        $ts
		      }
		    }
		  }
		}
		pools {
		  vip {
		    addrs = $POOL_FIRST-$POOL_LAST
		  }
		}
		secrets {
		  ike-any {
		    secret = "$PSK"
		  }
		}
	EOF
	local preload=""
	[ "$SWAN_SAD" = none ] && preload="env LD_PRELOAD=$(nullsad)"
	STRONGSWAN_CONF=$d/strongswan.conf setsid ip netns exec $RSP taskset -c 1 unshare --mount --propagation private \
		sh -c "mount -t tmpfs tmpfs /run && exec $preload $CHARON" >"$d/charon.out" 2>&1 &
	PIDS+=("$!")
	for _ in $(seq 200); do
		STRONGSWAN_CONF=$d/strongswan.conf swanctl --load-all --file "$d/swanctl.conf" --uri "unix://$d/charon.vici" \
			>"$d/load" 2>&1 && return 0
		sleep 0.05
	done
	echo "charon did not come up: $(cat "$d/charon.out" "$d/load")" >&2
	return 1
}

start_ternrun() { # $1 dir
	local d=$1 auth fwd=""
	if [ "$AUTH" = pubkey ]; then
		auth="auth = \"pubkey\"
certificate = \"$CERTS/tern.pem\"
private_key = \"$CERTS/tern.key\"
ca = [\"$CERTS/ca.pem\"]"
	else
		auth="auth = \"psk\"
psk = \"$PSK\""
	fi
	if [ "$FWD" = 1 ]; then
		fwd='
[[interface]]
name = "t1"
device = "t1"
driver = "afpacket"
addresses = ["10.0.3.1/24"]

[[interface]]
name = "t2"
device = "t2"
driver = "afpacket"
addresses = ["10.0.4.1/24"]'
	fi
	cat >"$d/tern.toml" <<-EOF
		[dataplane]
		workers = 1
		cpus = [1]
		control_cpus = [1]

		[[interface]]
		name = "r0"
		device = "r0"
		driver = "afpacket"
		addresses = ["10.0.2.2/24"]
		$fwd

		[api]
		socket = "$d/tern.sock"

		[metrics]
		listen = "127.0.0.1:9456"

		[ike_service]
		threads = 1

		[[tunnel]]
		name = "ra0"
		type = "ipsec"
		local = "10.0.2.2"
		remote = "any"
		addresses = ["10.64.0.1/10"]

		[[ike]]
		name = "ra"
		local = "10.0.2.2"
		remote = "any"
		tunnel = "ra0"
		local_id = "tern.example"
		$auth
		proposals = ["$PROPOSAL"]
		esp_proposals = ["$ESP"]
		pool = "$POOL_FIRST-$POOL_LAST"
		# As charon here: no liveness checks (tern's default, 30 s, would
		# have it check every idle tunnel during the run).
		dpd_secs = 0
	EOF
	setsid ip netns exec $RSP "$TERN" run --config "$d/tern.toml" >"$d/tern.log" 2>&1 &
	PIDS+=("$!")
	for _ in $(seq 600); do
		"$TERN" --socket "$d/tern.sock" status >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "tern did not come up: $(tail -20 "$d/tern.log")" >&2
	return 1
}

sample_responder() { # $1 pid: "seconds ticks rss_kB" each second until stopped
	local s0
	s0=$(date +%s.%N)
	while [ -r "/proc/$1/stat" ]; do
		echo "$(calc "$(date +%s.%N) - $s0") $(resp_ticks "$1") $(rss_kb "$1")"
		sleep 1
	done
}

# Per milestone segment: the responder's CPU per tunnel (ticks between the
# samples nearest the segment's ends), its RSS growth per tunnel held, and
# the segment's retransmissions. $1 the generator's output, $2 the samples,
# $3 CLK_TCK, $4 the RSS (kB) before the run.
by_milestone() {
	awk -v hz="$3" -v rss0="$4" '
		FNR == NR { t[NR] = $1; k[NR] = $2; r[NR] = $3; n = NR; if (NR == 1) pk = $2; next }
		/^milestone / {
			for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
			best = 1
			for (j = 1; j <= n; j++) if ((t[j] - f["at_seconds"])^2 < (t[best] - f["at_seconds"])^2) best = j
			dn = f["tunnels"] - pn
			dm = f["messages"] - pm
			printf "milestone tunnels=%d responder_cpu_us_per_tunnel=%.0f rss_B_per_tunnel=%.0f segment_retransmit_pct=%.3f (sample at %.0f s of %.1f s)\n",
				f["tunnels"], (dn > 0 ? (k[best] - pk) / hz * 1e6 / dn : 0), (r[best] - rss0) * 1024 / f["tunnels"],
				(dm > 0 ? (f["retransmits"] - pr) * 100 / dm : 0), t[best], f["at_seconds"]
			pn = f["tunnels"]; pm = f["messages"]; pr = f["retransmits"]; pk = k[best]
		}' "$2" "$1"
}

metric() { # $1 name: tern's metric (the first sample)
	ip netns exec $RSP curl -s http://127.0.0.1:9456/metrics | awk -v m="$1" '$1 == m {print $2; exit}'
}

forwarding() { # prints "offered_mpps delivered_mpps" through tern, t2 -> t1
	local dmac smac r0 r1 out
	dmac=$(ip -n $RSP link show t2 | awk '/link\/ether/ {print $2}')
	smac=$(ip -n $TG link show g0 | awk '/link\/ether/ {print $2}')
	r0=$(ip netns exec $SINK cat /sys/class/net/s0/statistics/rx_packets)
	out=$(ip netns exec $TG taskset -c 0 "$BENCH" gen --dev g0 --scenario single-flow-50fw --via afpacket \
		--dst-mac "$dmac" --src-mac "$smac" --src 10.0.4.2 --dst 10.0.3.2 --seconds "$FWD_SECS" 2>/dev/null)
	r1=$(ip netns exec $SINK cat /sys/class/net/s0/statistics/rx_packets)
	echo "$(echo "$out" | sed -n 's/.*mpps=\([0-9.]*\).*/\1/p') $(calc "($r1 - $r0) / $FWD_SECS / 1e6")"
}

# Prints "case tunnels established verified setups_per_sec ike_setups_per_sec
# retransmit_pct gen_cpu_us resp_cpu_us resp_rss_B_per_tunnel verify_p50_us
# sample_ok/sample stop"; details on stderr.
one_run() {
	local c=$1 out rpid t0 t1 rx0=0 hz resp_us rss0=0 rss1=0 rss_per=- gen_flags=() fwd0="" fwd1="" inner=10.64.0.1
	out=$(mktemp -d "$WORK/run.XXXX")
	hz=$(getconf CLK_TCK)
	# The kernel owns 10.0.2.2 for charon and the bare responder; a
	# standalone tern owns it itself.
	ip -n $RSP addr flush dev r0
	[ "$c" = ternrun ] || ip -n $RSP addr add 10.0.2.2/24 dev r0
	case $c in
	swan)
		start_charon "$out"
		rpid=${PIDS[-1]}
		inner=10.0.2.2
		# Identities (PSK; a certificate names one). charon leases a
		# virtual IP per identity, so when verifying every tunnel has its
		# own (its echo needs its own route back). Otherwise tunnel i is
		# identity i mod SWAN_IDS: charon keeps a list of the IKE SAs of
		# each identity pair and walks it at each setup (one identity: a
		# walk of every tunnel held), and tern-ike's initiate() finds its
		# peer by name in a list (an identity per tunnel: the generator
		# then costs 1.2 ms a tunnel at 54K). 1,000 keeps both short.
		if [ "$AUTH" = psk ]; then
			if [ "$VERIFY$SAMPLE" != 00 ]; then
				gen_flags+=(--ids "$TUNNELS")
			elif [ "$SWAN_IDS" -gt 1 ]; then
				gen_flags+=(--ids "$((SWAN_IDS < TUNNELS ? SWAN_IDS : TUNNELS))")
			fi
		fi
		;;
	tern)
		setsid ip netns exec $RSP taskset -c 1 "$BENCH" ike --respond --local 10.0.2.2 "${RESP_AUTH[@]}" \
			--proposal "$PROPOSAL" --esp-proposal "$ESP" --local-id tern.example --pool "$POOL_FIRST-$POOL_LAST" \
			$([ "$VERIFY" = 1 ] || [ "$SAMPLE" != 0 ] && echo --verify) --seconds 100000 >"$out/resp" 2>&1 &
		rpid=$!
		PIDS+=("$rpid")
		for _ in $(seq 100); do ip netns exec $RSP ss -uln | grep -q '10.0.2.2:500 ' && break; sleep 0.05; done
		;;
	ternrun)
		start_ternrun "$out"
		rpid=${PIDS[-1]}
		# Neighbours resolved first (a first IKE_SA_INIT lost to ARP
		# would cost a 1 s retransmission).
		ip netns exec $CLI ping -c 2 -i 0.2 -W 1 10.0.2.2 >/dev/null || true
		[ "$FWD" = 1 ] && fwd0=$(forwarding)
		;;
	esac
	# charon has a pool only when verifying (else it refuses the request).
	[ "$c" != swan ] || [ "$VERIFY$SAMPLE" != 00 ] && gen_flags+=(--vip)
	[ "$VERIFY" = 1 ] && gen_flags+=(--verify)
	[ "$SAMPLE" != 0 ] && gen_flags+=(--verify-sample "$SAMPLE")
	[ "$STOP" = 1 ] && gen_flags+=(--stop)
	# The generator's first retransmission timeout (doubled after): on a
	# loaded shared host a 1 s stall of the responder retransmits the whole
	# window at once, 64 of ~45K messages at 20K tunnels, over the 0.1 % rule.
	[ -n "$RETRANSMIT_MS" ] && gen_flags+=(--retransmit-ms "$RETRANSMIT_MS")
	[ -n "$MILESTONES" ] && gen_flags+=(--milestones "$MILESTONES")
	napi_setup
	rss0=$(rss_kb "$rpid")
	t0=$(resp_ticks "$rpid")
	[ -z "$RX_PID" ] || rx0=$(ticks "$RX_PID")
	# The machine is shared: the load beside each run (the responder's CPU
	# per tunnel is the fairer figure when it is high).
	echo "    $c load before: $(uptime | sed 's/.*load/load/')" >&2
	# The responder's CPU ticks and RSS each second, to split them by
	# milestone (the generator reports a milestone's time since its start).
	sample_responder "$rpid" >"$out/samples" &
	local sampler=$!
	ip netns exec $CLI taskset -c 0 "$BENCH" ike --local 10.0.2.1 --responder 10.0.2.2 --tunnels "$TUNNELS" \
		--window "$WINDOW" "${GEN_AUTH[@]}" --proposal "$PROPOSAL" --esp-proposal "$ESP" \
		--inner-dst $inner "${gen_flags[@]}" --timeout "${TIMEOUT:-$((TUNNELS / 500 + 300))}" >"$out/gen" 2>&1 || true
	t1=$(resp_ticks "$rpid")
	[ -z "$RX_PID" ] || echo "    $c receive thread (napi/r0): $(calc "($(ticks "$RX_PID") - $rx0) * 100 / ($t1 - $t0 > 0 ? $t1 - $t0 : 1)") % of the responder's ticks" >&2
	rss1=$(rss_kb "$rpid")
	kill "$sampler" 2>/dev/null || true
	wait "$sampler" 2>/dev/null || true
	echo "    $c load after: $(uptime | sed 's/.*load/load/'); responder RSS ${rss0} kB -> ${rss1} kB" \
		"$([ "$c" = swan ] && echo "; charon.log $(stat -c %s "$out/charon.log" 2>/dev/null || echo 0) B")" >&2
	local up counted
	up=$(field established "$out/gen")
	counted=$(sed -n 's/^verify .*\bverified=\([0-9]*\).*/\1/p' "$out/gen")
	counted=${counted:-$up}
	resp_us=$(calc "($t1 - $t0) / $hz * 1e6 / (${counted:-0} > 0 ? ${counted:-1} : 1)")
	[ "${up:-0}" -gt 0 ] && rss_per=$(calc "int(($rss1 - $rss0) * 1024 / $up)")
	if [ "$c" = ternrun ]; then
		# The IKE gauges are sampled: wait until they show every tunnel.
		for _ in $(seq 50); do
			[ "$(metric tern_ike_sas)" -ge "${up:-0}" ] 2>/dev/null && [ "$(metric tern_ipsec_sas)" -ge $((2 * ${up:-0})) ] 2>/dev/null && break
			sleep 0.1
		done
		echo "    ternrun metrics: tern_ike_sas=$(metric tern_ike_sas) tern_ike_child_sas=$(metric tern_ike_child_sas)" \
			"tern_ipsec_sas=$(metric tern_ipsec_sas) tern_ike_retransmits_total=$(metric tern_ike_retransmits_total)" \
			"tern_ike_cookies_sent_total=$(metric tern_ike_cookies_sent_total) tern_ike_half_open=$(metric tern_ike_half_open)" \
			"tern_ike_dropped_invalid_total=$(metric tern_ike_dropped_invalid_total)" \
			"rss ${rss0} kB -> ${rss1} kB" >&2
		if [ "$IDLE_SECS" -gt 0 ] && [ "${up:-0}" -gt 0 ]; then
			# Idle memory: each tunnel's cached IKE_AUTH response (kept for
			# retransmitted requests) goes after 64 s; the RSS right after
			# the last setup still holds those of the last minute's tunnels.
			sleep "$IDLE_SECS"
			local rss2
			rss2=$(rss_kb "$rpid")
			echo "    ternrun idle: after ${IDLE_SECS} s, RSS ${rss2} kB, $(calc "int(($rss2 - $rss0) * 1024 / $up)") B per tunnel" >&2
		fi
		if [ "$FWD" = 1 ]; then
			fwd1=$(forwarding)
			echo "    forwarding (offered delivered Mpps): before the tunnels $fwd0, with $up tunnels $fwd1" >&2
		fi
	fi
	grep -E '^(milestone|sample|verify|stopped_by)' "$out/gen" | sed 's/^/    /' >&2 || true
	by_milestone "$out/gen" "$out/samples" "$hz" "$rss0" | sed 's/^/    /' >&2 || true
	grep failure "$out/gen" | sed 's/^/    /' >&2 || true
	local sample="-"
	[ "$SAMPLE" != 0 ] && sample="$(sed -n 's/^sample .*\bverified=\([0-9]*\).*/\1/p' "$out/gen")/$SAMPLE"
	echo "$c $TUNNELS ${up:-?} ${counted:-?} $(field setups_per_sec "$out/gen") $(field ike_setups_per_sec "$out/gen")" \
		"$(field retransmit_pct "$out/gen") $(field cpu_us_per_tunnel "$out/gen") $resp_us $rss_per" \
		"$(sed -n 's/^verify .*latency_us_p50=\([0-9]*\).*/\1/p' "$out/gen" | grep . || echo -)" "$sample" \
		"$(grep -q '^stopped_by' "$out/gen" && echo stopped || echo -)"
	stop_pids
	true
}

echo "# ike_setup_rate: RUNS=$RUNS TUNNELS=$TUNNELS WINDOW=$WINDOW AUTH=$AUTH VERIFY=$VERIFY SAMPLE=$SAMPLE proposal $PROPOSAL / $ESP"
echo "# responder tunnels established verified setups_per_sec ike_setups_per_sec retransmit_pct gen_cpu_us_per_tunnel resp_cpu_us_per_tunnel resp_rss_B_per_tunnel verify_p50_us sample stop"
for c in "${CASES[@]}"; do
	: >"$WORK/res"
	for _ in $(seq "$RUNS"); do one_run "$c" >>"$WORK/res"; done
	sed 's/^/  run: /' "$WORK/res" >&2
	sort -k5 -g "$WORK/res" | awk -v n="$RUNS" 'NR == int((n + 1) / 2) { print }'
done
