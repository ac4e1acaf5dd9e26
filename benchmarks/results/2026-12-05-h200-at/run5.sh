#!/bin/bash
# Run 5 (GPU; H100 or H200): the gate kernels' chunked dots above configs.GATE_REGISTER_MAX
# (focus_dim 96 and 128; their whole-tile dots spilled 1-17 KB a thread). so2_peers.py at
# 65,536 edges, (6, 96) and (6, 128), forward + force backward: tilefuse with the whole-tile
# dots (before.py, the code before this change), then tilefuse against the eager reference
# (cuBLAS fp32) and DeePMD-kit 3.2.0 fp32, interleaved, each checked against float64 first.
# Needs .whl with DeePMD-kit's wheels (python3 benchmarks/device_wheels.py).
#   OUT=... bash benchmarks/results/2026-12-05-h200-at/run5.sh
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run5/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run5/gpu.txt
cat $OUT/run5/gpu.txt
S=65536:6:96,65536:6:128
timeout 110 python3 benchmarks/results/2026-12-05-h200-at/before.py --shapes $S --rounds 3 --target-ms 50 \
  --peers tilefuse --json $OUT/run5/before.json 2>&1 | grep -v Warn > $OUT/run5/before.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run5/before.txt
grep -E "^\| |exit|FAIL|rror" $OUT/run5/before.txt | tail -12
timeout $(( 290 - SECONDS )) python3 benchmarks/so2_peers.py --shapes $S --rounds 3 --target-ms 50 \
  --peers tilefuse,eager,deepmd --deepmd-tiles default --json $OUT/run5/after.json 2>&1 \
  | grep -v Warn > $OUT/run5/after.txt
echo "exit ${PIPESTATUS[0]} at ${SECONDS}s" >> $OUT/run5/after.txt
grep -E "^\| |exit|FAIL|rror" $OUT/run5/after.txt | tail -16
