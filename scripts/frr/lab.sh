#!/usr/bin/env bash
# A throwaway FRR lab for tern in Linux mode (issue 8), in network namespaces.
#
#   src ──[src0 | rsrc]── r ──[ri1 | i1]── i1   bird, AS 65001 (primary)
#                         │ ──[ri2 | i2]── i2   bird, AS 65002 (secondary: AS path prepended)
#                         └ ──[ro2 | o2]── o2   FRR zebra + ospfd (loopback 10.255.2.1/24)
#
# r is the tern host: tern drives rsrc, ri1, ri2, ro2 in Linux mode; FRR's
# zebra (with -M dplane_fpm_nl, FPM to tern on 127.0.0.1:2620), bgpd (eBGP
# to i1 and i2, IPv4 and IPv6 sessions) and ospfd (area 0 with o2 on ro2)
# run on the kernel side of the same devices. i1 and i2 hold 203.0.113.1
# and 2001:db8:113::1 on lo, so traffic to a covered destination is
# answered by whichever peer tern forwards to.
#
# Usage (root):
#   lab.sh net  PREFIX             namespaces, links, addresses
#   lab.sh routes PREFIX N4 N6     route files for bird: the first N4 IPv4 and
#                                  N6 IPv6 prefixes of the full table (0 = all,
#                                  N4 = -1: only the test destinations)
#   lab.sh daemons PREFIX          start bird (i1, i2) and FRR (r, o2)
#   lab.sh vtysh PREFIX NS CMD     run a vtysh command in r or o2
#   lab.sh birdc PREFIX NS CMD     run a birdc command in i1 or i2
#   lab.sh restart-frr PREFIX      restart r's zebra, bgpd and ospfd (as
#                                  `systemctl restart frr` does); zebra
#                                  reconnects to tern's FPM and resends
#   lab.sh down PREFIX             stop the daemons, remove the namespaces
# State lives in /tmp/PREFIX (configs, pid files, sockets, logs).
#
# TERN_LAB_EXCEPTION=tap (for net and daemons): the lab for tern's TAP
# exception path. r's addresses are not put on its veths (tern owns them;
# its configuration gives the addresses to the TAPs tern-src, tern-i1,
# tern-i2, tern-o2), and ospfd's interface is tern-o2 instead of ro2.
# r and o2 also run ospf6d (OSPFv3 over the link-local addresses; o2
# announces fd00:255:2::1/64 from its loopback).
#
# Needs: iproute2, frr, bird2 (apt-get install -y frr bird2).
set -euo pipefail

cmd=${1:?usage: lab.sh net|routes|daemons|vtysh|birdc|down PREFIX ...}
P=${2:?prefix}
D=/tmp/$P
TABLE=${TERN_FULL_TABLE:-$(cd "$(dirname "$0")/../.." && pwd)/../shared/data/full-table-2025.txt.gz}
FRR=/usr/lib/frr
TAP=no
[ "${TERN_LAB_EXCEPTION:-kernel}" = tap ] && TAP=yes

ns() { echo "${P}$1"; }
inns() { local n; n=$(ns "$1"); shift; ip netns exec "$n" "$@"; }

link() { # link NS_A DEV_A NS_B DEV_B
    ip link add "$2" netns "$(ns "$1")" type veth peer name "$4" netns "$(ns "$3")"
    inns "$1" ip link set "$2" up
    inns "$3" ip link set "$4" up
}

addr() { # addr NS DEV ADDR...
    local n=$1 d=$2
    shift 2
    for a in "$@"; do
        case $a in
        *:*) inns "$n" ip addr add "$a" dev "$d" nodad ;;
        *) inns "$n" ip addr add "$a" dev "$d" ;;
        esac
    done
}

net() {
    for n in src r i1 i2 o2; do
        ip netns add "$(ns $n)"
        inns $n ip link set lo up
        inns $n sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
    done
    link src src0 r rsrc
    link r ri1 i1 i1
    link r ri2 i2 i2
    link r ro2 o2 o2
    addr src src0 10.1.0.2/24 fd00:1::2/64
    addr i1 i1 10.2.0.2/24 fd00:2::2/64
    addr i2 i2 10.3.0.2/24 fd00:3::2/64
    if [ $TAP = no ]; then
        addr r rsrc 10.1.0.1/24 fd00:1::1/64
        addr r ri1 10.2.0.1/24 fd00:2::1/64
        addr r ri2 10.3.0.1/24 fd00:3::1/64
        addr r ro2 10.4.0.1/24
    fi
    addr o2 o2 10.4.0.2/24
    addr o2 lo 10.255.2.1/24
    if [ $TAP = yes ]; then
        addr o2 lo fd00:255:2::1/64
    fi
    inns src ip route add default via 10.1.0.1
    inns src ip -6 route add default via fd00:1::1
    for n in i1 i2; do
        local g4=10.2.0.1 g6=fd00:2::1
        [ $n = i2 ] && g4=10.3.0.1 g6=fd00:3::1
        inns $n ip route add default via $g4
        inns $n ip -6 route add default via $g6
        inns $n ip addr add 203.0.113.1/32 dev lo
        inns $n ip addr add 2001:db8:113::1/128 dev lo
    done
    # The kernel of r routes nothing itself in Linux mode; FRR still wants
    # forwarding on to call itself a router.
    inns r sysctl -qw net.ipv4.ip_forward=1
    mkdir -p "$D"
    chmod 755 "$D"
}

routes() {
    local n4=${3:-1000} n6=${4:-100}
    mkdir -p "$D"
    # Always cover the test destinations (203.0.113.0/24, 2001:db8:113::/48).
    # Without the table file (N4 = N6 = -1 asks for none): the test
    # destinations only.
    local table=$TABLE
    [ -f "$table" ] && [ "$n4" != -1 ] || table=/dev/null
    {
        echo "route 203.0.113.0/24 via 10.2.0.1;"
        if [ "$table" != /dev/null ]; then
            zcat "$table" | tr -d '\r' | awk -v n="$n4" '!/:/ && $1 != "203.0.113.0/24" { if (n == 0 || c < n) { print "route " $1 " via 10.2.0.1;"; c++ } }'
        fi
    } >"$D/routes4.conf"
    {
        echo "route 2001:db8:113::/48 via fd00:2::1;"
        if [ "$table" != /dev/null ]; then
            zcat "$table" | tr -d '\r' | awk -v n="$n6" '/:/ { if (n == 0 || c < n) { print "route " $1 " via fd00:2::1;"; c++ } }'
        fi
    } >"$D/routes6.conf"
    wc -l "$D/routes4.conf" "$D/routes6.conf"
}

bird_conf() { # bird_conf NS ASN PEER4 PEER6 LOCAL4 PREPEND
    local n=$1 as=$2 p4=$3 p6=$4 l4=$5 prepend=$6 dir=$D/$1
    local filt="accept;"
    [ "$prepend" = yes ] && filt="bgp_path.prepend($as); bgp_path.prepend($as); accept;"
    # i2 has its own link: rewrite the static gateways onto it.
    local r4=$D/routes4.conf r6=$D/routes6.conf
    if [ "$n" = i2 ]; then
        sed 's/via 10.2.0.1;/via 10.3.0.1;/' "$D/routes4.conf" >"$dir/routes4.conf"
        sed 's/via fd00:2::1;/via fd00:3::1;/' "$D/routes6.conf" >"$dir/routes6.conf"
        r4=$dir/routes4.conf r6=$dir/routes6.conf
    fi
    cat >"$dir/bird.conf" <<EOF
router id $l4;
protocol device {}
protocol static s4 {
    ipv4;
include "$r4";
}
protocol static s6 {
    ipv6;
include "$r6";
}
protocol bgp up4 {
    local as $as; neighbor $p4 as 65000;
    ipv4 { import none; export filter { $filt }; next hop self; };
}
protocol bgp up6 {
    local as $as; neighbor $p6 as 65000;
    ipv6 { import none; export filter { $filt }; next hop self; };
}
EOF
}

frr_start() { # frr_start NS DAEMONS...
    local n=$1 dir=$D/$1
    shift
    chown -R frr:frr "$dir"
    inns "$n" "$FRR/zebra" -d -P 0 -i "$dir/zebra.pid" -z "$dir/zserv.api" --vty_socket "$dir" \
        -f "$dir/zebra.conf" -u frr -g frr --log file:"$dir/zebra.log" $([ "$n" = r ] && echo "-M dplane_fpm_nl")
    for d in "$@"; do
        inns "$n" "$FRR/$d" -d -P 0 -i "$dir/$d.pid" -z "$dir/zserv.api" --vty_socket "$dir" \
            -f "$dir/$d.conf" -u frr -g frr --log file:"$dir/$d.log"
    done
}

daemons() {
    mkdir -p "$D"/{r,o2,i1,i2}
    [ -f "$D/routes4.conf" ] || routes x "$P" 1000 100 >/dev/null
    bird_conf i1 65001 10.2.0.1 fd00:2::1 10.2.0.2 no
    bird_conf i2 65002 10.3.0.1 fd00:3::1 10.3.0.2 yes
    for n in i1 i2; do
        inns $n bird -c "$D/$n/bird.conf" -s "$D/$n/bird.ctl" -P "$D/$n/bird.pid"
    done
    cat >"$D/r/zebra.conf" <<EOF
hostname r
fpm address 127.0.0.1 port 2620
EOF
    cat >"$D/r/bgpd.conf" <<EOF
hostname r
router bgp 65000
 bgp router-id 10.2.0.1
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor 10.2.0.2 remote-as 65001
 neighbor 10.3.0.2 remote-as 65002
 neighbor fd00:2::2 remote-as 65001
 neighbor fd00:3::2 remote-as 65002
 address-family ipv4 unicast
  neighbor 10.2.0.2 activate
  neighbor 10.3.0.2 activate
 exit-address-family
 address-family ipv6 unicast
  neighbor fd00:2::2 activate
  neighbor fd00:3::2 activate
 exit-address-family
EOF
    local ro2=ro2
    [ $TAP = yes ] && ro2=tern-o2
    cat >"$D/r/ospfd.conf" <<EOF
hostname r
interface $ro2
 ip ospf hello-interval 1
 ip ospf dead-interval 4
router ospf
 ospf router-id 10.4.0.1
 redistribute connected
 network 10.4.0.0/24 area 0
EOF
    cat >"$D/o2/zebra.conf" <<EOF
hostname o2
EOF
    cat >"$D/o2/ospfd.conf" <<EOF
hostname o2
interface o2
 ip ospf hello-interval 1
 ip ospf dead-interval 4
router ospf
 ospf router-id 10.4.0.2
 network 10.4.0.0/24 area 0
 network 10.255.2.0/24 area 0
EOF
    if [ $TAP = yes ]; then
        for n in r o2; do
            local id=10.4.0.1 dev=tern-o2
            [ $n = o2 ] && id=10.4.0.2 dev=o2
            cat >"$D/$n/ospf6d.conf" <<EOF
hostname $n
interface $dev
 ipv6 ospf6 area 0.0.0.0
 ipv6 ospf6 hello-interval 1
 ipv6 ospf6 dead-interval 4
router ospf6
 ospf6 router-id $id
 redistribute connected
EOF
        done
        frr_start r bgpd ospfd ospf6d
        frr_start o2 ospfd ospf6d
    else
        frr_start r bgpd ospfd
        frr_start o2 ospfd
    fi
}

stop_pids() {
    for f in "$D"/*/*.pid; do
        [ -f "$f" ] || continue
        local pid
        pid=$(cat "$f" 2>/dev/null || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
    sleep 0.3
    for f in "$D"/*/*.pid; do
        [ -f "$f" ] || continue
        local pid
        pid=$(cat "$f" 2>/dev/null || true)
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
    done
}

down() {
    stop_pids
    for n in src r i1 i2 o2; do
        ip netns del "$(ns $n)" 2>/dev/null || true
    done
    rm -rf "$D"
}

restart_frr() {
    local dir=$D/r pid
    for d in ospfd bgpd zebra; do
        pid=$(cat "$dir/$d.pid")
        kill "$pid"
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    done
    frr_start r bgpd ospfd
}

case $cmd in
net) net ;;
restart-frr) restart_frr ;;
routes) routes "$@" ;;
daemons) daemons ;;
vtysh) inns "$3" vtysh --vty_socket "$D/$3" -c "$4" ;;
birdc) inns "$3" birdc -s "$D/$3/bird.ctl" "$4" ;;
down) down ;;
*)
    echo "unknown command $cmd" >&2
    exit 2
    ;;
esac
