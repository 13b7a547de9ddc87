#!/bin/bash
# Six 5 s trials at a fixed 1.2 Mpps (single-flow-50fw), from the tree's root:
#   docs/perf/2026-12-06/loss12/run.sh LABEL MOVE     (DUT=xdp-fwd for the peer)
# MOVE=1 moves every thread of the tern daemon to CPU 0 once it is up
# (the tester starts it on the DUT's CPU 1). Writes LABEL.json and
# LABEL.err here and prints (lost, refused into the DUT's ring, latest
# late tick in us) per trial. Runs of 2026-12-06: A1, A2 (tern, MOVE=0),
# B1 (tern, MOVE=1), X1 (DUT=xdp-fwd).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
if [ "${2:-0}" = 1 ]; then
  ( for _ in $(seq 1 600); do
      p=$(pgrep -f "tern run --config" | head -1 || true)
      if [ -n "$p" ]; then sleep 0.5; taskset -a -p 1 "$p" >/dev/null; echo "moved $p"; break; fi
      sleep 0.05
    done ) &
fi
./target/release/tern bench rfc2544 --scenario single-flow-50fw --dut "${DUT:-tern}" --trial-secs 5 \
  --loads 1.2,1.2,1.2,1.2,1.2,1.2 --no-search --json > "$here/$1.json" 2> "$here/$1.err"
wait
python3 - "$here/$1.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for dut in d['duts']:
    fl = dut['sizes'][0]['frame_loss']
    print(sys.argv[1], [(t['lost'], t['ring_drops']['into_dut'], round(t['dut_busy_late_max_us'])) for t in fl])
PY
