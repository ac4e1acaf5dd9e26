#!/bin/bash
# Run 28 (GPU, any Hopper card): run28_scale_bound.py, the ws kernel's K walk with its per-chunk
# scale loads made loop-invariant (wrong outputs, timing only) against the shipped module.
#   OUT=... bash benchmarks/results/2026-12-07-h200-bf/run28.sh
set -u
cd "$(dirname "$0")/../../.."
mkdir -p $OUT/run28
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > $OUT/run28/gpu.txt
python3 -c "import torch,triton;print(torch.__version__,triton.__version__)" >> $OUT/run28/gpu.txt
PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d) timeout 300 \
  python3 benchmarks/results/2026-12-07-h200-bf/run28_scale_bound.py --rounds 5 > $OUT/run28/bound.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run28/bound.txt
grep -v "^ *$" $OUT/run28/bound.txt | grep -v Warn | cut -c1-170
