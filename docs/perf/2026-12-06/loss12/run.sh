#!/bin/bash
# $1: label, $2: move (1) or not (0)
cd /work/main
if [ "$2" = 1 ]; then
  ( for i in $(seq 1 600); do p=$(pgrep -f "tern run --config" | head -1); if [ -n "$p" ]; then sleep 0.5; taskset -a -p 1 $p >/dev/null; echo moved $p; break; fi; sleep 0.05; done ) &
fi
./target/release/tern bench rfc2544 --scenario single-flow-50fw --dut ${DUT:-tern} --trial-secs 5 --loads 1.2,1.2,1.2,1.2,1.2,1.2 --no-search --json > /tmp/mv/$1.json 2>/tmp/mv/$1.err
wait
python3 - /tmp/mv/$1.json <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
for dut in d['duts']:
    fl=dut['sizes'][0]['frame_loss']
    print(sys.argv[1], [ (t['lost'], t['ring_drops']['into_dut'], round(t['dut_busy_late_max_us'])) for t in fl])
PY
