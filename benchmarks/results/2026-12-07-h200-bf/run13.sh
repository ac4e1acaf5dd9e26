#!/bin/bash
# Run 13 (GPU, any Hopper card): run13_steady.py, 20 steps back to back of bf16, fp8_block and
# fp8_block with its weights reused (shapes 2-3): the wall time a step against the kernels' busy
# time, the GPU's gaps, the caching allocator's device allocations and retries.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run13.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run13
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run13/gpu.txt
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
timeout 150 python3 benchmarks/results/2026-12-07-h200-bf/run13_steady.py > $OUT/run13/steady.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run13/steady.txt
cat $OUT/run13/gpu.txt; grep -v Warning $OUT/run13/steady.txt | cut -c1-260
