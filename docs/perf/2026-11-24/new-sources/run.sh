#!/bin/sh
cd /work/main
# BASE_TERN: tern built at c5ed058 (the lane before fc03db7)
for b in base new base new; do
  if [ $b = base ]; then T=$BASE_TERN; else T=$PWD/target/release/tern; fi
  echo "=== $b $(date +%T)"
  TERN=$T LANE_GEN=$PWD/target/release/examples/lane_gen XSK_FWD=$PWD/target/release/examples/xsk_fwd \
    GEN_ARGS="--srcs 65536" CASES="lane kfwd" timeout 400 flock /work/rig.lock crates/xdp/scripts/lane_rig.sh 3 single-flow-50fw
done
echo "=== done $(date +%T)"
