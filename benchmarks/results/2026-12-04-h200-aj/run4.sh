#!/bin/bash
# Run 4 (GPU): replay_gaps.py: fp8_block's and bf16 tilefuse's steps as CUDA-graph replays and
# eager, with the idle gaps between their kernels (run 3's kernel sums are 0.5-0.9 ms under
# fp8_block's as-called time).
#   OUT=... bash benchmarks/results/2026-12-04-h200-aj/run4.sh
set -u
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src TILEFUSE_CACHE_DIR=$(mktemp -d)
mkdir -p $OUT/run4
timeout 280 python3 benchmarks/results/2026-12-04-h200-aj/replay_gaps.py > $OUT/run4/gaps.txt 2>&1
echo "exit $?" >> $OUT/run4/gaps.txt
grep -v Warn $OUT/run4/gaps.txt | tail -80
