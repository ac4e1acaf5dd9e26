#!/bin/bash
# Run 5 (prepared): so2_peers.py at the three spec shapes on run 4's level-3 table (its
# TILEFUSE_CACHE_DIR; run in the same machine session). Carry .whl (DeePMD-kit 3.2.0 and its
# dependencies).
#   OUT=... bash benchmarks/results/2026-12-02-h200-q/run5.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-q4
mkdir -p $OUT/run5
timeout 300 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 4 \
  --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run5/peers.json 2>&1 \
  | grep -v Warn | tail -19 | tee $OUT/run5/peers.txt
