#!/bin/sh
set -e
ip netns del ltx 2>/dev/null || true
ip netns add ltx
ip -n ltx link add txa type veth peer name txb
ip -n ltx link set txa up
ip -n ltx link set txb up
A=$(ip netns exec ltx cat /sys/class/net/txa/ifindex)
B=$(ip netns exec ltx cat /sys/class/net/txb/ifindex)
cd /work/perf/s25/livetx
KEEP=1 ip netns exec ltx ./txlive $A $B 6400 64 60
ip netns exec ltx sh -c 'echo 1 > /sys/class/net/txb/threaded'
for t in $(ps -eLo tid,comm | awk '/napi\//{print $1}'); do taskset -pc 0 $t >/dev/null; done
ps -eLo tid,psr,comm | grep napi/ || true
for len in 60 60 60 1514; do for b in 64 256; do KEEP=1 ip netns exec ltx ./txlive $A $B 4000000 $b $len; done; done
ip netns del ltx
