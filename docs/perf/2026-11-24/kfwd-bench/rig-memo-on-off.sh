#!/bin/sh
cd /work/main
# NOMEMO_TERN: a tern built from this tree with LaneConfig::fwd_memo false by default
for d in 1024 16384; do
for b in memo nomemo memo nomemo; do
  if [ $b = nomemo ]; then T=$NOMEMO_TERN; else T=$PWD/target/release/tern; fi
  echo "=== dsts $d $b $(date +%T)"
  TERN=$T LANE_GEN=$PWD/target/release/examples/lane_gen XSK_FWD=$PWD/target/release/examples/xsk_fwd \
    GEN_ARGS="--dsts $d" CASES="lane" timeout 400 flock /work/rig.lock crates/xdp/scripts/lane_rig.sh 3 frame-sizes
done
done
echo "=== done $(date +%T)"
