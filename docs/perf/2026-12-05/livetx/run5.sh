#!/bin/sh
# live-frames TX (txlive, program parked on an idle veth) against copy-mode AF_XDP TX (txxsk),
# 60-byte frames out of txa into txb (XDP_DROP counter), sender on CPU 1;
# txb's NAPI first in softirq on the sender's CPU, then threaded on CPU 0.
ip netns del ltx 2>/dev/null || true
ip netns add ltx
ip -n ltx link add txa type veth peer name txb
ip -n ltx link add pk0 type veth peer name pk1
ip -n ltx link set txa up
ip -n ltx link set txb up
A=$(ip netns exec ltx cat /sys/class/net/txa/ifindex)
B=$(ip netns exec ltx cat /sys/class/net/txb/ifindex)
P=$(ip netns exec ltx cat /sys/class/net/pk0/ifindex)
drops() { ip netns exec ltx ethtool -S txb | awk '/rx_xdp_drops|xdp_drops/{s+=$2} END{print s+0}'; }
for mode in softirq threaded; do
  if [ $mode = threaded ]; then
    ip netns exec ltx sh -c 'echo 1 > /sys/class/net/txb/threaded'
    for t in $(ps -eLo tid,comm | awk '/napi\/txb/{print $1}'); do taskset -pc 0 $t >/dev/null; done
  fi
  echo "== txb NAPI: $mode"
  for b in 64 256; do
    echo -n "live: "; PARK=$P KEEP=1 ip netns exec ltx ./txlive $A $B 1000000 $b 60
    d0=$(drops); echo -n "xsk:  "; ip netns exec ltx ./txxsk txa 1000000 $b 60; sleep 0.2; d1=$(drops); echo "      sink counted $((d1-d0))"
  done
done
ip netns del ltx
