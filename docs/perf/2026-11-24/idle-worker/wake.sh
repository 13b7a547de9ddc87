#!/bin/bash
# usage: wake.sh BINARY LOG -> per-thread wakeups and CPU over 10 s of an idle `tern lab --keep`
B=$1; L=$2
(timeout 90 $B lab --keep > $L 2>&1 &)
for i in $(seq 1 80); do sleep 1; grep -qi 'ctrl-c' $L && break; done
sleep 2
P=$(pgrep -f "^$B lab --keep")
snap() { for t in /proc/$P/task/*; do echo "$(basename $t) $(cat $t/comm) $(cat $t/schedstat)"; done; }
snap > a.txt; sleep 10; snap > b.txt
join <(sort a.txt) <(sort b.txt) | awk '{printf "%-14s wakeups/s %6.1f  cpu %5.3f %%\n",$2,($9-$5)/10,($7-$3)/1e9/10*100}'
kill -INT $P; sleep 3; $B lab --cleanup > /dev/null
