#!/bin/bash
# Run 15 (GPU, any Hopper card; prepared, not yet run): run15_wgrad_next.py, run 8's best Gluon fp8
# wgrad against the same with no global load a tile waits for (the next tile's cursor and first
# scales read under this tile's wgmma; run 14's Nsight Compute put 31% of its warps' cycles on
# such waits), against the op's Triton wgrad: bits at small ragged problems and the timed ones,
# then dW1 + dW2 at the spec's shapes, balanced and routed, graph replay, interleaved rounds.
#   OUT=... [SHAPES=2,3] [ROUNDS=5] [LIMIT=seconds, default 280] bash benchmarks/results/2026-12-07-h200-bf/run15.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run15
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run15/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run15/gpu.txt
cat $OUT/run15/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout ${LIMIT:-280} python3 benchmarks/results/2026-12-07-h200-bf/run15_wgrad_next.py --shapes ${SHAPES:-1,2,3} \
  --rounds ${ROUNDS:-5} > $OUT/run15/wgrad.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run15/wgrad.txt
grep -v "^ *$" $OUT/run15/wgrad.txt | cut -c1-140 | tail -50
