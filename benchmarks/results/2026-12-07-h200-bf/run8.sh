#!/bin/bash
# Run 8 (GPU, any Hopper card): run8_wgrad_pingpong.py, fp8_block's weight gradients through a
# Gluon kernel whose two consumer warp groups take turns on the tensor cores, against the op's
# Triton wgrad: bits at small ragged problems and at the timed ones, then dW1 + dW2 at the
# spec's shapes, balanced and routed counts, graph replay, interleaved rounds.
#   OUT=... [SHAPES=2,3] [ROUNDS=5] [LIMIT=seconds, default 300] bash benchmarks/results/2026-12-07-h200-bf/run8.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run8
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run8/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run8/gpu.txt
cat $OUT/run8/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout ${LIMIT:-300} python3 benchmarks/results/2026-12-07-h200-bf/run8_wgrad_pingpong.py --shapes ${SHAPES:-1,2,3} \
  --rounds ${ROUNDS:-5} > $OUT/run8/wgrad.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run8/wgrad.txt
grep -v "^ *$" $OUT/run8/wgrad.txt | cut -c1-140 | tail -70
