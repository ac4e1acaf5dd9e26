#!/bin/bash
# Run 7 (GPU, any Hopper card): run7_timeline.py, one step's launches in order (stream, start,
# duration) of bf16 and fp8_block as called at the spec's three shapes (interleave 32, the
# built-in table, balanced counts), and fp8_block with its weights quantized once and reused
# (the steady state of gradient accumulation), then the three as eager calls in 5 rounds: where
# fp8_block's step time goes now that fc1 + GLU and the
# fc2 dgrad + dGLU run in the ws kernel.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run7.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run7
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run7/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run7/gpu.txt
cat $OUT/run7/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 300 python3 benchmarks/results/2026-12-07-h200-bf/run7_timeline.py > $OUT/run7/timeline.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run7/timeline.txt
grep -E "launches|  sum|eager|exit" $OUT/run7/timeline.txt | cut -c1-120
