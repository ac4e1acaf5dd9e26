#!/bin/bash
# Run 5 (GPU): sustained.py: bf16 tilefuse's and fp8_block's steps replayed back to back for 4 s
# each at spec shapes 1 and 3, per half-second window beside the SM clock and power draw
# (why run 1's harness reads both slower than run 4's single replays, fp8_block the more).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run5.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run5
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,clocks.applications.graphics --format=csv > $OUT/run5/gpu.txt
timeout 200 python3 benchmarks/results/2026-12-04-h200-aj/sustained.py --log $OUT/run5/smi.csv > $OUT/run5/sustained.txt 2>&1
echo "exit $?" >> $OUT/run5/sustained.txt
cat $OUT/run5/gpu.txt; grep -v Warn $OUT/run5/sustained.txt | tail -50
