#!/bin/bash
# Run 2: benchmarks/so2_peers.py at the three spec shapes on the built-in table as shipped
# (2026-12-02-h200-q runs 3-4's entries; a fresh cache, so nothing else), with launch.gate_warps.
# Carry .whl (DeePMD-kit 3.2.0 and its dependencies).
#   OUT=... bash benchmarks/results/2026-12-02-h200-r/run2.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$PWD/.tfcache-r2
mkdir -p $OUT/run2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run2/gpu.txt
timeout 330 python3 benchmarks/so2_peers.py --shapes 647000:3:32,300000:6:32,400000:2:64 --rounds 3 \
  --deepmd-tiles h20 --peers tilefuse,tilefuse-l3,compile,deepmd,deepmd-fp16x3 --json $OUT/run2/peers.json 2>&1 \
  | grep -v Warn | tee $OUT/run2/peers_full.txt | tail -22
