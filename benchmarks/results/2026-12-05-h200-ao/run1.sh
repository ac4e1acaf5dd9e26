#!/bin/bash
# Run 1 (GPU; prepared): fp8_block's quantizer tiles on the card it runs on: the standing
# benchmarks/quant_bandwidth.py, step section, every candidate tile (each checked bitwise
# against the shipped one first), at the spec's three shapes. A few minutes (not yet timed).
#   OUT=... bash benchmarks/results/2026-12-05-h200-ao/run1.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
mkdir -p $OUT/run1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/run1/gpu.txt
timeout 540 python3 benchmarks/quant_bandwidth.py --sections step --tiles --shapes 1,2,3 --rounds 5 \
  > $OUT/run1/tiles.txt 2>&1
echo "exit $? at ${SECONDS}s" >> $OUT/run1/tiles.txt
grep -E "^shape|of copy|left out|exit" $OUT/run1/tiles.txt | cut -c1-160
