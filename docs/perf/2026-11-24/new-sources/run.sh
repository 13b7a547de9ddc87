#!/bin/sh
cd /work/main
for b in base new base new; do
  if [ $b = base ]; then T=/work/perf/s26/tern-c5ed058; else T=$PWD/target/release/tern; fi
  echo "=== $b $(date +%T)"
  TERN=$T LANE_GEN=$PWD/target/release/examples/lane_gen XSK_FWD=$PWD/target/release/examples/xsk_fwd \
    GEN_ARGS="--srcs 65536" CASES="lane kfwd" timeout 400 flock /work/rig.lock crates/xdp/scripts/lane_rig.sh 3 single-flow-50fw
done
echo "=== done $(date +%T)"
