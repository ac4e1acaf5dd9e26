#!/bin/bash
# Run 9 (GPU, any Hopper card): run9_host.py, the host's time per grouped_glu_mlp step (forward
# call, backward call) with the GPU kept busy, bf16 and fp8_block (with and without its weights
# reused), shapes 2-3; then cProfile of fp8_block's step: where fp8_block's GPU idle comes from.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run9.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run9
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run9/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run9/gpu.txt
cat $OUT/run9/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 200 python3 benchmarks/results/2026-12-07-h200-bf/run9_host.py > $OUT/run9/host.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run9/host.txt
grep -E "host us|forward|exit" $OUT/run9/host.txt | cut -c1-140
grep -A32 "Ordered by: internal" $OUT/run9/host.txt | head -34 | cut -c1-150
