#!/bin/bash
# Run 16 (GPU, any Hopper card; prepared, not yet run): run16_bf16_wgrad_next.py, the bf16 weight
# gradients' Gluon kernel (ws_wgrad) against the same with the next tile's cursor read under
# this tile's first wgmma: bits at small ragged problems and at the timed ones, then dW1 + dW2 at
# the spec's shapes, balanced and routed, at ws_wgrad's two tiles, graph replay, interleaved.
#   OUT=... [SHAPES=2,3] [ROUNDS=5] [LIMIT=seconds, default 240] bash benchmarks/results/2026-12-07-h200-bf/run16.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run16
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run16/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run16/gpu.txt
cat $OUT/run16/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout ${LIMIT:-240} python3 benchmarks/results/2026-12-07-h200-bf/run16_bf16_wgrad_next.py --shapes ${SHAPES:-1,2,3} \
  --rounds ${ROUNDS:-5} > $OUT/run16/wgrad.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run16/wgrad.txt
grep -v "^ *$" $OUT/run16/wgrad.txt | cut -c1-140 | tail -30
